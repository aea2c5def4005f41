//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"opsq/cmd/opsq/clustertest"
)

// answerCounter is an http.RoundTripper that counts the status of every answer, by route
// and status, and the 503s that came without Retry-After. Install it in a clustertest.Cluster's
// client (c.HTTP.Transport) to see what its consumers and producers were answered.
type answerCounter struct {
	next http.RoundTripper
	mu   sync.Mutex
	// byStatus counts "POST /v1/complete 503" and the like; ids are not part of the path
	// of the routes counted here.
	byStatus       map[string]int
	noRetryAfter   int
	transportError int
}

func countStatuses(next http.RoundTripper) *answerCounter {
	return &answerCounter{next: next, byStatus: map[string]int{}}
}

func (s *answerCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	path := r.URL.Path
	if strings.HasPrefix(path, "/v1/submissions/") {
		path = "/v1/submissions/{id}"
	}
	if err != nil {
		s.transportError++
		s.byStatus[fmt.Sprintf("%s %s error (%s)", r.Method, path, errorKind(err))]++
		return resp, err
	}
	s.byStatus[fmt.Sprintf("%s %s %d", r.Method, path, resp.StatusCode)]++
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		s.noRetryAfter++
	}
	return resp, err
}

// serverErrors lists the counts of answers of 500 or more other than 503.
func (s *answerCounter) serverErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, n := range s.byStatus {
		var status int
		if _, err := fmt.Sscanf(k[strings.LastIndexByte(k, ' ')+1:], "%d", &status); err != nil {
			continue // a transport error
		}
		if status >= 500 && status != http.StatusServiceUnavailable {
			out = append(out, fmt.Sprintf("%s ×%d", k, n))
		}
	}
	slices.Sort(out)
	return out
}

func (s *answerCounter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.byStatus))
	for k := range s.byStatus {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s ×%d; ", k, s.byStatus[k])
	}
	fmt.Fprintf(&b, "transport errors ×%d", s.transportError)
	return b.String()
}

// errorKind names a transport error briefly: the client's own cancellation or timeout, or
// the connection failing.
func errorKind(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "connection"
}

// count503 is how many answers were 503.
func (s *answerCounter) count503() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.byStatus {
		if strings.HasSuffix(k, " 503") {
			n += c
		}
	}
	return n
}

// outageLoad is the load the outage tests (a restart of PostgreSQL, of a Citus worker) keep
// on 2 instances: 2 000 chunks submitted, 4 consumers reserving 5 at a time, a producer
// submitting more, every answer counted (statuses).
type outageLoad struct {
	insts    []*clustertest.Instance
	ledger   *clustertest.Ledger
	consumer clustertest.ConsumerConfig
	cs       *clustertest.Consumers
	statuses *answerCounter
	stop     func() // stops the producer and waits for it
}

// startOutageLoad starts the instances of c and the load on them, and returns once 500
// chunks are completed.
func startOutageLoad(t *testing.T, c *clustertest.Cluster) *outageLoad {
	t.Helper()
	ctx := t.Context()
	o := &outageLoad{statuses: countStatuses(c.HTTP.Transport)}
	c.HTTP.Transport = o.statuses
	o.insts = c.StartN(2)
	o.ledger = clustertest.NewLedger()
	for i := range 4 {
		clustertest.SubmitChunks(ctx, t, o.insts[i%2].Client, o.ledger, 500)
	}
	tg := clustertest.NewTargets(clustertest.URLs(o.insts...)...)
	o.consumer = clustertest.ConsumerConfig{N: 4, Max: 5, Targets: tg, Work: 20 * time.Millisecond}
	o.cs = clustertest.RunConsumers(t, c.HTTP, o.ledger, o.consumer)
	producerCtx, stopProducer := context.WithCancel(ctx)
	producerDone := make(chan struct{})
	go func() {
		defer close(producerDone)
		clustertest.RunProducer(producerCtx, c.HTTP, tg, o.ledger, 20, 50*time.Millisecond)
	}()
	var once sync.Once
	o.stop = func() { once.Do(func() { stopProducer(); <-producerDone }) }
	t.Cleanup(o.stop)
	clustertest.PollUntil(t, 60*time.Second, "500 chunks completed", func() string {
		if n := o.ledger.Done(); n < 500 {
			return fmt.Sprintf("%d completed", n)
		}
		return ""
	})
	return o
}
