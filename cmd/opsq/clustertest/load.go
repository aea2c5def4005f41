package clustertest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

// Targets is a round-robin list of URLs that may change while consumers run. Safe for
// concurrent use.
type Targets struct {
	mu   sync.Mutex
	urls []string
	next int
}

// NewTargets returns the round-robin list of urls.
func NewTargets(urls ...string) *Targets { return &Targets{urls: urls} }

// Set replaces the list.
func (tg *Targets) Set(urls ...string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.urls = urls
}

// Pick returns the next URL.
func (tg *Targets) Pick() string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.next++
	return tg.urls[tg.next%len(tg.urls)]
}

// ConsumerConfig configures RunConsumers.
type ConsumerConfig struct {
	N       int      // consumers
	Targets *Targets // where each request goes, round-robin
	Max     int      // chunks per reserve. Defaults to 5.
	Lease   string   // Defaults to 10s.
	Wait    string   // Defaults to 1s.
	Work    time.Duration
}

// Consumers are goroutines that reserve and complete chunks; they live until Stop (at the
// latest the test's cleanup). Safe for concurrent use.
type Consumers struct {
	Errors atomic.Int64 // failed requests (instances killed, paused, restarting)

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// RunConsumers starts cfg.N consumers; each loops reserve → (work) → complete, recording
// every delivery and answer in l. Errors (an instance gone, the database restarting) are
// counted and retried; a completion is retried until it is answered, since a repeated
// completion is harmless. Each consumer holds at most cfg.Max chunks at a time. Stop them
// with Stop (also called at t's cleanup).
func RunConsumers(t testing.TB, hc *http.Client, l *Ledger, cfg ConsumerConfig) *Consumers {
	cfg.Max = cmp.Or(cfg.Max, 5)
	cfg.Lease = cmp.Or(cfg.Lease, "10s")
	cfg.Wait = cmp.Or(cfg.Wait, "1s")
	ctx, cancel := context.WithCancel(context.Background())
	cs := &Consumers{cancel: cancel}
	for i := range cfg.N {
		name := fmt.Sprintf("consumer-%d", i+1)
		cs.wg.Go(func() {
			for ctx.Err() == nil {
				via := cfg.Targets.Pick()
				c := client.New(via, client.WithHTTPClient(hc))
				chunks, err := c.Reserve(ctx, wire.ReserveRequest{Max: cfg.Max, Lease: cfg.Lease, Wait: cfg.Wait, Consumer: name})
				if err != nil {
					if ctx.Err() == nil {
						cs.Errors.Add(1)
						_ = SleepCtx(ctx, 50*time.Millisecond)
					}
					continue
				}
				if len(chunks) == 0 {
					continue
				}
				keys := make([]ChunkKey, len(chunks))
				comps := make([]wire.Completion, len(chunks))
				for i, ch := range chunks {
					keys[i] = l.Deliver(ch, via, name)
					comps[i] = wire.Completion{Token: ch.Token, Output: ch.Token}
				}
				_ = SleepCtx(ctx, cfg.Work)
				CompleteAll(ctx, hc, cfg.Targets, l, keys, comps, &cs.Errors)
			}
		})
	}
	t.Cleanup(cs.Stop)
	return cs
}

// Stop cancels the consumers and waits for them; safe twice.
func (cs *Consumers) Stop() {
	cs.once.Do(func() {
		cs.cancel()
		cs.wg.Wait()
	})
}

// CompleteAll completes chunks through any of tg, retrying until answered or ctx ends,
// and records the answers in l; errCount counts the failed requests.
func CompleteAll(ctx context.Context, hc *http.Client, tg *Targets, l *Ledger, keys []ChunkKey, comps []wire.Completion, errCount *atomic.Int64) {
	for ctx.Err() == nil {
		c := client.New(tg.Pick(), client.WithHTTPClient(hc))
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		res, err := c.Complete(cctx, comps...)
		cancel()
		if err != nil {
			errCount.Add(1)
			_ = SleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		if len(res) != len(comps) {
			l.Problem("complete of %d tokens answered %d results", len(comps), len(res))
			return
		}
		for i, r := range res {
			l.Answered(keys[i], comps[i].Token, r.Status)
		}
		return
	}
}

// RunProducer submits a submission of n chunks through tg every interval until ctx ends,
// recording those that were created in l; failed submits are not retried.
func RunProducer(ctx context.Context, hc *http.Client, tg *Targets, l *Ledger, n int, interval time.Duration) {
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	for ctx.Err() == nil {
		c := client.New(tg.Pick(), client.WithHTTPClient(hc))
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		created, err := c.Submit(sctx, wire.Submission{Chunks: chunks})
		cancel()
		if err == nil {
			l.AddSubmission(created.ID, created.ChunksTotal)
		}
		_ = SleepCtx(ctx, interval)
	}
}

// SubmitChunks submits a submission of n chunks ("0", "1", …) and records it in l.
func SubmitChunks(ctx context.Context, t testing.TB, c *client.Client, l *Ledger, n int) string {
	t.Helper()
	chunks := make([]string, n)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	created, err := c.Submit(ctx, wire.Submission{Chunks: chunks})
	if err != nil {
		t.Fatalf("submitting %d chunks: %v", n, err)
	}
	if created.ChunksTotal != int64(n) {
		t.Fatalf("submitted %d chunks; the answer says %d", n, created.ChunksTotal)
	}
	l.AddSubmission(created.ID, int64(n))
	return created.ID
}

// ReserveHeld reserves up to max chunks through c with a long lease and does not complete
// them: they stay in flight. They are recorded in l as delivered to "holder".
func ReserveHeld(ctx context.Context, t testing.TB, c *client.Client, l *Ledger, via string, max int) []wire.ReservedChunk {
	t.Helper()
	chunks, err := c.Reserve(ctx, wire.ReserveRequest{Max: max, Lease: "2m", Consumer: "holder"})
	if err != nil {
		t.Fatalf("reserving chunks to hold through %s: %v", via, err)
	}
	for _, ch := range chunks {
		l.Deliver(ch, via, "holder")
	}
	return chunks
}

// Jitter returns a random duration in [lo, hi).
func Jitter(lo, hi time.Duration) time.Duration {
	return lo + rand.N(hi-lo)
}

// WaitCompleted waits until every submission of l is completed; on timeout it describes
// where the remaining chunks are.
func (c *Cluster) WaitCompleted(timeout time.Duration, l *Ledger) time.Duration {
	c.t.Helper()
	ids := l.SubmissionIDs()
	return PollUntil(c.t, timeout, fmt.Sprintf("%d submissions to complete", len(ids)), func() string {
		var n int
		if err := c.Pool.QueryRow(c.t.Context(), `SELECT count(*) FROM opsq.submissions_completed WHERE id = ANY($1)`, ids).Scan(&n); err != nil {
			return err.Error()
		}
		if n == len(ids) {
			return ""
		}
		return fmt.Sprintf("%d of %d completed; %d deliveries, %d completions; %s", n, len(ids),
			l.Delivered(), l.Done(), c.describeBacklog(ids))
	})
}
