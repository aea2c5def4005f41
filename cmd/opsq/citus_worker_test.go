//go:build citus && linux

package main

import (
	"fmt"
	"testing"
	"time"

	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestClusterCitusWorkerRestart (issue 30, the end-to-end ledger on Citus): a Citus worker
// stops for a few seconds under 2 instances, their consumers and a producer, then starts
// again. Meanwhile what needs the worker's shards fails as "try again" (503 with
// Retry-After), never as a 500; afterwards the instances go on by themselves and every
// chunk, those submitted during the outage included, is completed once. Citus only
// (-tags citus, make test-citus); it stops a worker of the package's shared test cluster,
// so it does not run in parallel with other tests.
func TestClusterCitusWorkerRestart(t *testing.T) {
	if !pgtest.Citus() {
		t.Fatalf("this test stops a Citus worker: run it with %s=1 (make test-citus)", pgtest.EnvCitus)
	}
	ctx := t.Context()
	c := clustertest.New(t, opsqBinary, pgtest.NewDB(t))
	o := startOutageLoad(t, c)
	l, statuses, cs, ccfg := o.ledger, o.statuses, o.cs, o.consumer

	start := pgtest.StopCitusWorker(t, 0)
	down := time.Now()
	doneAtStop := l.Done()
	// Until the worker is back, completions of its chunks cannot be written: wait until
	// some answer says so (a 503), rather than for a fixed time.
	clustertest.PollUntil(t, 30*time.Second, "an answer of 503 while the worker is down", func() string {
		if n := statuses.count503(); n == 0 {
			return "no 503 yet: " + statuses.String()
		}
		return ""
	})
	time.Sleep(time.Until(down.Add(3 * time.Second))) // the worker stays down at least 3 s
	start()
	up := time.Now()
	doneAtStart := l.Done()
	clustertest.PollUntil(t, 60*time.Second, "completions going on after the worker is back", func() string {
		if n := l.Done(); n < doneAtStart+200 {
			return fmt.Sprintf("%d completed since", n-doneAtStart)
		}
		return ""
	})
	t.Logf("worker down %s (%d chunks completed before, %d by its restart)", up.Sub(down).Round(time.Millisecond), doneAtStop, doneAtStart)
	o.stop()
	c.WaitCompleted(120*time.Second, l)
	cs.Stop()
	st := l.Check(t, ctx, c.Pool)
	t.Logf("duplicates %d; consumer request errors %d; answers: %s", st.Duplicates, cs.Errors.Load(), statuses)
	// No instance loses its shards (the claims live on the coordinator, which stays up):
	// a chunk is handed out again only if its lease ran out while its completion failed,
	// at most the chunks the consumers hold at once.
	if bound := ccfg.N * ccfg.Max; st.Duplicates > bound {
		t.Errorf("%d duplicate deliveries around the worker's restart; want at most %d", st.Duplicates, bound)
	}
	for _, e := range statuses.serverErrors() {
		t.Errorf("answered %s while the worker was down; want 503 with Retry-After, never another 5xx", e)
	}
	if statuses.noRetryAfter > 0 {
		t.Errorf("%d answers of 503 without Retry-After", statuses.noRetryAfter)
	}
}
