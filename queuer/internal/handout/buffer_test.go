package handout

import (
	"math/rand/v2"
	"testing"
	"time"

	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/opsqtype"
	"opsq/reserver"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// candidateQueries is how many candidate queries ran on counter's connections, and how
// many rows they returned in all.
func candidateQueries(counter *pgtest.Statements) (queries, rows int64) {
	return counter.Containing(pgtest.CandidateColumns)
}

// setBufferLifetime sets how long q's buffers live, so that a slow test machine does not
// see them expire mid-test.
func setBufferLifetime(q *engine, d time.Duration) {
	q.path.buffers.mu.Lock()
	defer q.path.buffers.mu.Unlock()
	q.path.buffers.lifetime = d
}

// buffered returns the keys of the candidates q's buffers hold.
func (b *buffers) keys() map[reserver.Key]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[reserver.Key]int{}
	for _, buf := range b.mu.byLeaf {
		for _, c := range buf.cands {
			out[c.key]++
		}
	}
	return out
}

// waitAllShards waits until q holds every shard, so that no acquisition drops the buffers
// mid-test.
func waitAllShards(t *testing.T, q *engine) {
	t.Helper()
	pgtest.Eventually(t, 10*time.Second, "every shard held", func() bool { return len(q.claims.Reservable()) == q.path.shardCount })
}

// startCountedEngine starts an engine whose statements (the candidate pool's too) are
// counted, whose buffers live a minute, and which holds every shard.
func startCountedEngine(t *testing.T) (*engine, *pgtest.Statements) {
	t.Helper()
	counter := &pgtest.Statements{}
	pool := pgtest.NewTracedPool(t, counter) // the candidate pool copies its tracer
	q := startEngine(t, pool)
	setBufferLifetime(q, time.Minute)
	waitAllShards(t, q)
	return q, counter
}

// TestBufferServesReservesWithoutACandidateQuery: after the reserve that scans a leaf,
// the next reserves of the leaf take from its buffer and run no candidate query, and the
// ordered leaves still hand out their chunks in order.
func TestBufferServesReservesWithoutACandidateQuery(t *testing.T) {
	t.Parallel()
	q, counter := startCountedEngine(t)
	id := submitN(t, q, 2000, submissions.NewSubmission{})
	// The NOTIFY of the submission drops newest_first's buffers when it comes back: wait
	// for it (Submit dropped them once already).
	pgtest.Eventually(t, 10*time.Second, "the NOTIFY of the submission", func() bool { return q.path.buffers.era(strategy.NewestFirst) >= 2 })

	const reserves = 50
	held := map[int32]bool{} // the chunks handed out, held until the test ends
	for _, kind := range []strategy.Kind{strategy.Random, strategy.OldestFirst, strategy.NewestFirst} {
		req := Request{Max: 1, Strategy: strategy.Node{Kind: kind}}
		scansBefore, _ := candidateQueries(counter)
		first := reserveN(t, q, req)
		if len(first) != 1 {
			t.Fatalf("%s: the first reserve got %d chunks; want 1", kind, len(first))
		}
		held[first[0].ChunkIndex] = true
		before, _ := candidateQueries(counter)
		if before == scansBefore {
			t.Fatalf("%s: the first reserve ran no candidate query that the test counts", kind)
		}
		total := counter.Total()
		prev := first[0].ChunkIndex
		for i := range reserves {
			c := reserveN(t, q, req)
			if len(c) != 1 || c[0].SubmissionID != id {
				t.Fatalf("%s: reserve %d after the first got %+v; want a chunk of %d", kind, i, c, id)
			}
			// The ordered leaves hand out the next chunk in their order that is not held.
			step := map[strategy.Kind]int32{strategy.OldestFirst: 1, strategy.NewestFirst: -1}[kind]
			if step != 0 {
				want := prev + step
				for held[want] {
					want += step
				}
				if c[0].ChunkIndex != want {
					t.Fatalf("%s: reserve %d gave chunk %d after %d; want %d", kind, i, c[0].ChunkIndex, prev, want)
				}
			}
			held[c[0].ChunkIndex] = true
			prev = c[0].ChunkIndex
		}
		if n, _ := candidateQueries(counter); n != before {
			n -= before
			t.Errorf("%s: %d candidate queries for the %d reserves after the first; want 0 (served from the buffer)", kind, n, reserves)
		}
		t.Logf("%s: %d reserves after the first ran %d statements in all", kind, reserves, counter.Total()-total)
	}
}

// TestBufferKeepsEveryRowItsScanRead: a random reserve that fills the leaf's buffer reads
// the rows its answers take and the rows its buffer keeps, and no more: each row its
// candidate queries returned is handed out or buffered, none read past what a buffer
// keeps, to be read again by a later scan. Each round starts with no buffer, and
// completes what it got; a round's scan starts at a random place, so several are run.
func TestBufferKeepsEveryRowItsScanRead(t *testing.T) {
	t.Parallel()
	q, counter := startCountedEngine(t)
	submitN(t, q, 20_000, submissions.NewSubmission{}) // about 2 500 in each window of 8 shards a random scan reads
	const max, rounds = 200, 8
	for round := range rounds {
		q.path.buffers.dropAll()
		queries, rows := candidateQueries(counter)
		got := reserveN(t, q, Request{Max: max, Strategy: strategy.Node{Kind: strategy.Random}})
		if len(got) != max {
			t.Fatalf("round %d: a random reserve of %d got %d chunks", round, max, len(got))
		}
		q2, r2 := candidateQueries(counter)
		queries, rows = q2-queries, r2-rows
		buffered := len(q.path.buffers.keys())
		t.Logf("round %d: %d candidate queries read %d rows: %d handed out, %d buffered", round, queries, rows, len(got), buffered)
		if queries == 0 {
			t.Fatalf("round %d: no candidate query counted for a reserve with no buffer", round)
		}
		if rows != int64(len(got)+buffered) {
			t.Errorf("round %d: the scan read %d rows, handed out %d and buffered %d; want each row it read handed out or buffered", round, rows, len(got), buffered)
		}
		done := make([]outcome.Completion, len(got))
		for i, c := range got {
			done[i] = outcome.Completion{Token: c.Token}
		}
		if _, err := q.Complete(t.Context(), done); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBufferNeverHandsOutAChunkFinishedSinceItsScan: chunks in random's buffer are
// reserved by another leaf's scan and completed, or failed and retried; the buffer never
// hands them out again (their tombstones live while it does), and a retried chunk is
// found again by a scan, once.
func TestBufferNeverHandsOutAChunkFinishedSinceItsScan(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	setBufferLifetime(q, time.Minute)
	waitAllShards(t, q)
	const total = 2400                                                                                                                           // about 300 in each window of 8 shards that a random scan reads
	submitN(t, q, total, submissions.NewSubmission{Lifecycle: submissions.Lifecycle{Backoff: submissions.Backoff{Factor: 2, Max: time.Minute}}}) // retried at once
	random := Request{Max: 1, Strategy: strategy.Node{Kind: strategy.Random}}
	if c := reserveN(t, q, random); len(c) != 1 {
		t.Fatalf("the first random reserve got %d chunks; want 1", len(c))
	}
	inBuffer := q.path.buffers.keys()
	if len(inBuffer) < 100 {
		t.Fatalf("random's buffer holds %d candidates after a scan of %d chunks; want 100 or more", len(inBuffer), total)
	}
	// oldest_first (another leaf, another buffer) takes every other chunk, those in
	// random's buffer among them.
	var all []Chunk
	for range 3 {
		all = append(all, reserveN(t, q, Request{Max: 1000, Strategy: strategy.Node{Kind: strategy.OldestFirst}})...)
	}
	if len(all) != total-1 {
		t.Fatalf("oldest_first got %d chunks; want the %d left", len(all), total-1)
	}
	var done []outcome.Completion
	var failed []outcome.Failure
	retried := map[reserver.Key]bool{}
	for i, c := range all {
		k := reserver.Key{SubmissionID: c.SubmissionID, ChunkIndex: c.ChunkIndex}
		if i%4 == 0 && inBuffer[k] > 0 {
			failed = append(failed, outcome.Failure{Token: c.Token, Error: "again", Retry: true})
			retried[k] = true
			continue
		}
		done = append(done, outcome.Completion{Token: c.Token})
	}
	if st, err := q.Complete(t.Context(), done); err != nil {
		t.Fatal(err)
	} else {
		for i, s := range st {
			if s != opsqtype.StatusCompleted {
				t.Fatalf("completion %d: %s; want completed", i, s)
			}
		}
	}
	if st, err := q.Fail(t.Context(), failed); err != nil {
		t.Fatal(err)
	} else {
		for i, s := range st {
			if s != opsqtype.StatusRetrying {
				t.Fatalf("failure %d: %s; want retrying", i, s)
			}
		}
	}
	if q.path.tombs.len() == 0 {
		t.Fatalf("no tombstones kept while random's buffer lives; want those of the chunks finished since its scan")
	}
	// Only the retried chunks are reservable now, each once, with its attempt counted.
	got := map[reserver.Key]int{}
	for {
		c := reserveN(t, q, random)
		if len(c) == 0 {
			break
		}
		k := reserver.Key{SubmissionID: c[0].SubmissionID, ChunkIndex: c[0].ChunkIndex}
		if !retried[k] {
			t.Fatalf("random handed out chunk %v, completed since its buffer's scan", k)
		}
		if got[k]++; got[k] > 1 {
			t.Fatalf("random handed out retried chunk %v twice", k)
		}
		if c[0].Retries != 1 {
			t.Errorf("retried chunk %v handed out with retries %d; want 1 (the row as it is now)", k, c[0].Retries)
		}
	}
	if len(got) != len(retried) {
		t.Errorf("random handed out %d of the %d retried chunks; want all", len(got), len(retried))
	}
}

// TestBufferedConsumersHandOutEachChunkOnce: consumers of several leaves reserve and
// complete concurrently, each leaf's buffer holding chunks that the others reserve and
// complete meanwhile: every chunk is handed out once.
func TestBufferedConsumersHandOutEachChunkOnce(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	const total = 6000
	for range 3 {
		submitN(t, q, total/3, submissions.NewSubmission{})
	}
	kinds := []strategy.Kind{strategy.Random, strategy.Random, strategy.OldestFirst, strategy.NewestFirst, strategy.CustomPriority}
	consumeAllOnce(t, q, pool, 24, total, func(g int) Request {
		return Request{Max: 1 + rand.N(8), Lease: time.Minute, Strategy: strategy.Node{Kind: kinds[g%len(kinds)]}}
	})
}

// TestBufferDropsCancelledSubmissions: a cancel removes the submission's candidates from
// the buffers at once, and no reserve hands them out.
func TestBufferDropsCancelledSubmissions(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	setBufferLifetime(q, time.Minute)
	waitAllShards(t, q)
	cancelled := submitN(t, q, 300, submissions.NewSubmission{})
	kept := submitN(t, q, 300, submissions.NewSubmission{})
	random := Request{Max: 1, Strategy: strategy.Node{Kind: strategy.Random}}
	reserveN(t, q, random)
	of := func(id int64) int {
		n := 0
		for k := range q.path.buffers.keys() {
			if k.SubmissionID == id {
				n++
			}
		}
		return n
	}
	if of(cancelled) == 0 || of(kept) == 0 {
		t.Fatalf("random's buffer holds %d chunks of one submission and %d of the other; want some of each", of(cancelled), of(kept))
	}
	if _, err := q.Cancel(t.Context(), cancelled); err != nil {
		t.Fatal(err)
	}
	if n := of(cancelled); n != 0 {
		t.Fatalf("%d chunks of the cancelled submission still buffered after Cancel; want 0", n)
	}
	if of(kept) == 0 {
		t.Errorf("the other submission's chunks were dropped from the buffer too; want them kept")
	}
	for {
		c := reserveN(t, q, Request{Max: 100, Strategy: strategy.Node{Kind: strategy.Random}})
		if len(c) == 0 {
			break
		}
		for _, ch := range c {
			if ch.SubmissionID == cancelled {
				t.Fatalf("chunk %d of the cancelled submission handed out", ch.ChunkIndex)
			}
		}
	}
}

// TestBufferDroppedWhenAShardIsLost: an operator takes a shard away
// (force_release_shard.sql); when the owner notices, it drops its buffers, and hands out
// nothing it read from the shard under its old claim.
func TestBufferDroppedWhenAShardIsLost(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	pgtest.SetTimings(t, pool, pgtest.Timings{Renew: 200 * time.Millisecond})
	q := startEngine(t, pool)
	setBufferLifetime(q, time.Minute)
	waitAllShards(t, q)
	submitN(t, q, 600, submissions.NewSubmission{})
	c := reserveN(t, q, Request{Max: 1, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if len(c) != 1 {
		t.Fatalf("oldest_first got %d chunks; want 1", len(c))
	}
	if n, _ := q.path.buffers.size(); n == 0 {
		t.Fatalf("no candidates buffered after a scan of 600 chunks; want some")
	}
	shard := opsqtype.ShardOf(c[0].SubmissionID, int(c[0].ChunkIndex)+1, q.path.shardCount) // the next in order's
	lease, _ := q.claims.Lease(shard)
	if _, err := pool.Exec(t.Context(), `UPDATE opsq.shard_claims SET claimant = NULL, generation = generation + 1,
		soft_expires_at = NULL, hard_expires_at = NULL, inflight = 0, draining = false WHERE shard = $1`, shard); err != nil {
		t.Fatal(err)
	}
	pgtest.Eventually(t, 10*time.Second, "the owner notices the loss", func() bool {
		l, ok := q.claims.Lease(shard)
		return !ok || l.Generation != lease.Generation
	})
	if n, _ := q.path.buffers.size(); n != 0 {
		t.Fatalf("%d candidates still buffered after a shard was lost; want 0", n)
	}
}

// TestBufferBudget: however many leaves are buffered and however large their inputs, the
// buffers hold at most bufferLeafMax candidates and bufferLeafBytes of inputs each, and
// bufferTotalMax and bufferTotalBytes together; a buffer ends its tombstone epoch when it
// is dropped, at the latest when its lifetime ends.
func TestBufferBudget(t *testing.T) {
	t.Parallel()
	tombs := newTombstones()
	b := newBuffers(tombs)
	b.lifetime = time.Hour
	cands := func(n, size int) []candidate {
		out := make([]candidate, n)
		for i := range out {
			out[i] = candidate{key: reserver.Key{SubmissionID: 1, ChunkIndex: int32(i)}, input: make([]byte, size)}
		}
		return out
	}
	gens := map[int]int64{0: 1}
	for i := range 40 {
		epoch := tombs.begin()
		b.install(hintKey(strategy.Random, nil, []int32{int32(i)}), strategy.Random, cands(3*batchMax, 10), gens, epoch, 0)
		tombs.end(epoch) // the run ends; the buffer holds the epoch
		if n, bytes := b.size(); n > bufferTotalMax || bytes > bufferTotalBytes {
			t.Fatalf("after %d buffers of small chunks: %d candidates, %d bytes; want at most %d and %d", i+1, n, bytes, bufferTotalMax, bufferTotalBytes)
		}
	}
	if n, _ := b.size(); n != bufferTotalMax {
		t.Errorf("%d candidates buffered after 40 full buffers; want the budget, %d", n, bufferTotalMax)
	}
	for _, buf := range b.mu.byLeaf {
		if len(buf.cands) > bufferLeafMax {
			t.Errorf("a buffer holds %d candidates; want at most %d", len(buf.cands), bufferLeafMax)
		}
	}
	for i := range 40 {
		epoch := tombs.begin()
		b.install(hintKey(strategy.OldestFirst, nil, []int32{int32(i)}), strategy.OldestFirst, cands(100, 1<<20), gens, epoch, 0)
		tombs.end(epoch)
		if n, bytes := b.size(); n > bufferTotalMax || bytes > bufferTotalBytes {
			t.Fatalf("after %d buffers of 1 MiB chunks: %d candidates, %d bytes; want at most %d and %d", i+1, n, bytes, bufferTotalMax, bufferTotalBytes)
		}
	}
	for _, buf := range b.mu.byLeaf {
		if buf.bytes > bufferLeafBytes {
			t.Errorf("a buffer holds %d bytes of inputs; want at most %d", buf.bytes, bufferLeafBytes)
		}
	}
	holders := 0
	for _, n := range tombs.active {
		holders += n
	}
	if holders != len(b.mu.byLeaf) {
		t.Errorf("%d holders of tombstone epochs for %d buffers; want one each (the dropped ones ended theirs)", holders, len(b.mu.byLeaf))
	}
	b.dropAll()
	if n, bytes := b.size(); n != 0 || bytes != 0 || len(tombs.active) != 0 {
		t.Errorf("after dropAll: %d candidates, %d bytes, %d epochs held; want none", n, bytes, len(tombs.active))
	}

	// Unused, a buffer ends at its lifetime.
	b.lifetime = 50 * time.Millisecond
	epoch := tombs.begin()
	b.install(hintKey(strategy.Random, nil, []int32{0}), strategy.Random, cands(10, 10), gens, epoch, 0)
	tombs.end(epoch)
	pgtest.Eventually(t, 5*time.Second, "the buffer's lifetime ends", func() bool {
		n, _ := b.size()
		tombs.mu.Lock()
		defer tombs.mu.Unlock()
		return n == 0 && len(tombs.active) == 0
	})
}

// TestBufferNewWorkSortsFirst: a submission made here after newest_first's buffer was
// filled is what newest_first hands out next.
func TestBufferNewWorkSortsFirst(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	setBufferLifetime(q, time.Minute)
	waitAllShards(t, q)
	submitN(t, q, 300, submissions.NewSubmission{})
	newest := Request{Max: 1, Strategy: strategy.Node{Kind: strategy.NewestFirst}}
	reserveN(t, q, newest)
	later := submitN(t, q, 5, submissions.NewSubmission{})
	if c := reserveN(t, q, newest); len(c) != 1 || c[0].SubmissionID != later || c[0].ChunkIndex != 4 {
		t.Fatalf("newest_first after a new submission gave %+v; want chunk 4 of %d", c, later)
	}
}
