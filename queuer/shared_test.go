package queuer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"opsq/reserver"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestParkedReservesShareRuns: 400 parked reserves (max 1), then 400 chunks arrive: every
// reserve gets exactly one chunk, no chunk goes to two, and the reserves share their scans
// (before, each woken reserve ran its own: 400 runs and at least as many candidate queries).
func TestParkedReservesShareRuns(t *testing.T) {
	t.Parallel()
	counter := &pgtest.Statements{}
	pool := pgtest.NewTracedPool(t, counter)
	q := startQueuer(t, pool)

	const n = 400
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	got := make([][]Chunk, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute,
				Strategy: strategy.Default, Consumer: fmt.Sprintf("c%d", i)})
		})
	}
	waitParked(t, q, n)
	before, _ := counter.Containing(pgtest.CandidateColumns)
	submitN(t, q, n, NewSubmission{})
	wg.Wait()
	scans, _ := counter.Containing(pgtest.CandidateColumns)
	scans -= before

	seen := map[reserver.Key]int{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("reserve %d: %v", i, errs[i])
		}
		if len(got[i]) != 1 {
			t.Fatalf("reserve %d got %d chunks; want 1 each of the %d", i, len(got[i]), n)
		}
		k := reserver.Key{SubmissionID: got[i][0].SubmissionID, ChunkIndex: got[i][0].ChunkIndex}
		if j, ok := seen[k]; ok {
			t.Fatalf("chunk %v went to reserves %d and %d", k, j, i)
		}
		seen[k] = i
		if r, ok := q.reserver.Get(got[i][0].Token); !ok || r.Consumer != fmt.Sprintf("c%d", i) {
			t.Errorf("reserve %d: the reservation of its chunk names consumer %q; want c%d", i, r.Consumer, i)
		}
	}
	t.Logf("%d parked reserves served by %d candidate queries", n, scans)
	if scans == 0 {
		t.Errorf("no candidate query counted for %d woken reserves; the count misses them", n)
	}
	if scans > n/4 {
		t.Errorf("%d candidate queries for %d woken reserves; want at most %d (shared runs)", scans, n, n/4)
	}
}
