//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/claims"
	"opsq/cmd/opsq/clustertest"
	"opsq/migrations"
	"opsq/sql/pglocal"
)

// failoverChunksEnv sets the size of TestFailover's burn-down, for a shorter run or a
// longer one.
const failoverChunksEnv = "OPSQ_TEST_FAILOVER_CHUNKS"

// failoverChunksDefault is the burn-down of TestFailover unless failoverChunksEnv says
// otherwise: DESIGN.md §6's 40 000. The burn-down takes about 10 s on this 2-core machine
// while others work on it (the whole test 45–65 s, most of it failoverGap), so the test
// runs the figure itself rather than a smaller one.
const failoverChunksDefault = 40000

// failoverGap is how long after the primary's death TestFailover promotes the standby.
const failoverGap = claims.NodeReuseAfter/2 + 2*time.Second

// TestFailover: DESIGN.md §6, "Failover". PostgreSQL is a primary and its synchronous
// standby (each commit returns once the standby has it); two instances name both hosts in
// their database URL, with target_session_attrs=read-write. During a burn-down, while a
// producer keeps submitting, the primary is SIGKILLed (postmaster and backends, as a
// crashed host), and failoverGap later the standby is promoted, as a failover manager
// would. Then: every submission answered 201 exists on the new primary with all its
// chunks, every chunk is completed exactly once (a completion answered "completed" and
// lost would be handed out and answered "completed" again), no answer is a 500 (the gap
// answers 503 with Retry-After), and each instance is ready and serves a reserve within
// 10 s of the promotion.
func TestFailover(t *testing.T) {
	chunks := failoverChunksDefault
	if v := os.Getenv(failoverChunksEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of chunks, at least 1000", failoverChunksEnv, v)
		}
		chunks = n
	}
	if _, err := pglocal.BinDir(); err != nil {
		t.Fatalf("this test starts its own primary and standby: %v", err)
	}
	ctx := t.Context()

	// The primary waits at each commit until standby1 has flushed it.
	primary, standby, dbURL := primaryWithStandby(t)
	c := clustertest.New(t, opsqBinary, dbURL)
	// Every answer the consumers, the producer and the probes get is counted: none may be
	// a 500.
	statuses := countStatuses(c.HTTP.Transport)
	c.HTTP.Transport = statuses
	insts := c.StartN(2)
	l := clustertest.NewLedger()
	for i := range 4 {
		clustertest.SubmitChunks(ctx, t, insts[i%2].Client, l, chunks/4)
	}
	tg := clustertest.NewTargets(clustertest.URLs(insts...)...)
	// Leases outlast the gap, so that the chunks held across it are completed by the
	// consumers that hold them (a lease that runs out hands its chunk out again, a
	// different test).
	ccfg := clustertest.ConsumerConfig{N: 8, Max: 20, Targets: tg, Lease: "90s"}
	cs := clustertest.RunConsumers(t, c.HTTP, l, ccfg)
	producerCtx, stopProducer := context.WithCancel(ctx)
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		clustertest.RunProducer(producerCtx, c.HTTP, tg, l, 10, 100*time.Millisecond)
	}()
	defer func() { stopProducer(); <-producerDone }()

	clustertest.PollUntil(t, 60*time.Second, "half of the chunks completed", func() string {
		if n := l.Done(); n < int64(chunks/2) {
			return fmt.Sprintf("%d completed", n)
		}
		return ""
	})
	killed := time.Now()
	if err := primary.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	doneAtKill, submittedAtKill := l.Done(), len(l.SubmissionIDs())
	clustertest.PollUntil(t, 10*time.Second, "both instances to report not ready", func() string {
		for _, inst := range insts {
			if code, body := inst.Readyz(); code == 200 {
				return inst.ID + " still ready: " + body
			}
		}
		return ""
	})
	// A failover manager promotes the standby tens of seconds after the primary is lost
	// (pg_auto_failover's defaults took 52 s in docs/operations.md's recipe). The gap is
	// held that long: past every claim's soft and hard expiry, and past the 30 s an
	// instance mints submission ids after its last heartbeat (claims.NodeReuseAfter / 2),
	// after which a submit once answered 500.
	time.Sleep(time.Until(killed.Add(failoverGap)))
	promoted := time.Now() // the 10 s of §6 count from the order to promote
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	submittedAtPromotion := len(l.SubmissionIDs())
	t.Logf("primary killed with %d chunks completed and %d submissions acknowledged; standby promoted %s later, with %d acknowledged",
		doneAtKill, submittedAtKill, promoted.Sub(killed).Round(time.Millisecond), submittedAtPromotion)

	// Each instance is ready and serves a reserve within 10 s of the promotion (§6).
	for _, inst := range insts {
		clustertest.PollUntil(t, time.Until(promoted.Add(10*time.Second)), inst.ID+" to be ready and serve a reserve", func() string {
			if code, body := inst.Readyz(); code != 200 {
				return fmt.Sprintf("readyz %d %s", code, body)
			}
			return probeReserve(ctx, inst, c, tg, l, &cs.Errors)
		})
		t.Logf("%s ready and serving %s after the promotion", inst.ID, time.Since(promoted).Round(time.Millisecond))
	}

	// What the old primary acknowledged is on the new one: every submission answered 201
	// so far (that all their chunks are there, the ledger's check at the end says).
	newPrimary, err := pgxpool.New(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer newPrimary.Close()
	checkSubmissionsExist(t, newPrimary, l)

	// The producer goes on after the promotion until 10 more submissions are acknowledged,
	// then the burn-down finishes.
	clustertest.PollUntil(t, 30*time.Second, "10 more submissions acknowledged after the promotion", func() string {
		if n := len(l.SubmissionIDs()); n < submittedAtPromotion+10 {
			return fmt.Sprintf("%d acknowledged; %d at the promotion", n, submittedAtPromotion)
		}
		return ""
	})
	stopProducer()
	<-producerDone
	c.WaitCompleted(120*time.Second, l)
	cs.Stop()
	st := l.Check(t, ctx, newPrimary)
	t.Logf("burn-down of %d chunks and %d produced submissions; %d chunks handed out more than once; consumer request errors %d; answers: %s",
		chunks, st.Submissions-4, st.Redelivered, cs.Errors.Load(), statuses)
	for _, e := range statuses.serverErrors() {
		t.Errorf("answered %s around the failover; want 503 with Retry-After, never another 5xx", e)
	}
	if statuses.noRetryAfter > 0 {
		t.Errorf("%d answers of 503 without Retry-After", statuses.noRetryAfter)
	}
}

// migrate migrates the database at dbURL.
func migrate(t *testing.T, dbURL string) {
	t.Helper()
	ctx := t.Context()
	m, err := migrations.New(ctx, dbURL, migrations.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

// probeReserve asks inst for one chunk; "" when it answered (with a chunk or none), else
// why not. A chunk it hands out is recorded in l and completed, as a consumer would.
func probeReserve(ctx context.Context, inst *clustertest.Instance, c *clustertest.Cluster, tg *clustertest.Targets, l *clustertest.Ledger, errCount *atomic.Int64) string {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	got, err := inst.Client.Reserve(rctx, wire.ReserveRequest{Max: 1, Lease: "10s", Consumer: "probe"})
	if err != nil {
		return "reserve: " + err.Error()
	}
	for _, ch := range got {
		k := l.Deliver(ch, inst.URL, "probe")
		clustertest.CompleteAll(ctx, c.HTTP, tg, l, []clustertest.ChunkKey{k}, []wire.Completion{{Token: ch.Token, Output: ch.Token}}, errCount)
	}
	return ""
}

// checkSubmissionsExist checks that every submission of l is in db.
func checkSubmissionsExist(t *testing.T, db *pgxpool.Pool, l *clustertest.Ledger) {
	t.Helper()
	ids := l.SubmissionIDs()
	rows, err := db.Query(t.Context(), `SELECT id FROM opsq.submission_status WHERE id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	there := map[int64]bool{}
	for _, id := range found {
		there[id] = true
	}
	lost := 0
	for _, id := range ids {
		if !there[id] {
			lost++
			if lost <= 5 {
				t.Errorf("submission %d was answered 201 but is not on the new primary", id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged submissions lost in the failover; want 0", lost, len(ids))
	}
}
