package queuer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestUndoWakesParkedReserve: a reserve that looks while the only chunk is reserved by
// another request finds nothing and parks; that request then fails and gives the chunk
// back (undo, as a forwarded reserve whose forwarder gave up does). The parked reserve gets
// the chunk, and the other instances hear of it by a NOTIFY naming its shard. Before, undo
// woke nobody: the chunk stayed free while the parked reserve waited its whole wait (the
// bench's parked consumers that got nothing in 60 s).
func TestUndoWakesParkedReserve(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	listener, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(t.Context(), "LISTEN "+notify.ChannelWork); err != nil {
		t.Fatal(err)
	}

	id := submitN(t, q, 1, NewSubmission{})
	awaitNotification(t, listener.Conn(), "of the submission", func(p string) bool { return p == strconv.Itoa(opsqtype.ShardOf(id, 0, q.shardCount)) })
	taken, err := reserveHere(t.Context(), q, ReserveRequest{Max: 1, Lease: time.Minute, Strategy: strategy.Default})
	if err != nil || len(taken) != 1 {
		t.Fatalf("reserving the only chunk: %d chunks, %v", len(taken), err)
	}

	const wait = 30 * time.Second
	got := make(chan []Chunk, 1)
	go func() {
		chunks, err := q.Reserve(t.Context(), ReserveRequest{Max: 1, Lease: time.Minute, Wait: wait, Strategy: strategy.Default})
		if err != nil {
			t.Errorf("the parked reserve: %v", err)
		}
		got <- chunks
	}()
	waitParked(t, q, 1)

	start := time.Now()
	q.reserve.GiveBack(taken)
	select {
	case chunks := <-got:
		if len(chunks) != 1 || chunks[0].SubmissionID != taken[0].SubmissionID || chunks[0].ChunkIndex != taken[0].ChunkIndex {
			t.Fatalf("the parked reserve got %d chunks %+v after the undo; want the chunk given back", len(chunks), chunks)
		}
		t.Logf("the parked reserve had the chunk given back %s after the undo", time.Since(start))
	case <-time.After(wait / 2):
		t.Fatalf("the parked reserve still waits %s after the only chunk was given back", wait/2)
	}

	shard := strconv.Itoa(opsqtype.ShardOf(taken[0].SubmissionID, int(taken[0].ChunkIndex), q.shardCount))
	awaitNotification(t, listener.Conn(), "naming shard "+shard+" after the undo", func(p string) bool {
		return strings.Contains(","+p+",", ","+shard+",")
	})
}

// awaitNotification waits up to 10s for a NOTIFY on notify.ChannelWork whose payload satisfies ok,
// dropping the others.
// reserveHere reserves for req from this instance's shards only, without waiting or
// forwarding.
func reserveHere(ctx context.Context, q *Queuer, req ReserveRequest) ([]Chunk, error) {
	return q.reserve.Reserve(ctx, req)
}

func awaitNotification(t *testing.T, conn *pgx.Conn, what string, ok func(payload string) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no NOTIFY on %s %s within 10s: %v", notify.ChannelWork, what, err)
		}
		if n.Channel == notify.ChannelWork && ok(n.Payload) {
			return
		}
	}
}

// TestWaiterLooksAgainAfterFailedForward: a waiting reserve with nothing here forwards to
// an instance that fails to answer (as one too busy to answer within peerCallTimeout
// does), then has work for it. The waiter looks again by itself and gets the chunk: nothing
// else would wake it, since that instance's chunks are not new. Before, it waited its whole
// wait while the chunk stayed free there (the bench's parked consumers that got nothing).
func TestWaiterLooksAgainAfterFailedForward(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	var calls atomic.Int64
	input := "x" // a reserved chunk carries exactly one of input and prefix (DESIGN.md §3)
	answer, err := json.Marshal(wire.Reserved{Chunks: []wire.ReservedChunk{{
		Token: "peer-token", SubmissionID: "7", ChunkIndex: 3, Input: &input,
		StrategicMetadata: map[string]opsqtype.MetadataValue{}, ExpiresAt: time.Now().Add(time.Minute),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, `{"error":{"code":"internal","message":"busy"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer peer.Close()
	q.router.PointAt(peer.URL, 0)

	const wait = 30 * time.Second
	start := time.Now()
	chunks, err := q.Reserve(t.Context(), ReserveRequest{Max: 1, Lease: time.Minute, Wait: wait, Strategy: strategy.Default})
	took := time.Since(start)
	if err != nil || len(chunks) != 1 || chunks[0].Token != "peer-token" {
		t.Fatalf("a waiting reserve whose first forward failed: %d chunks, %v after %s; want the peer's chunk", len(chunks), err, took)
	}
	if took > wait/3 {
		t.Errorf("a waiting reserve whose first forward failed got the peer's chunk after %s; want well within its %s wait", took, wait)
	}
	t.Logf("the peer's chunk after %s, %d forwards", took.Round(time.Millisecond), calls.Load())
}

// holdCandidates holds the end of the first candidate query (its rows read) once armed,
// until released.
type holdCandidates struct {
	armed    atomic.Bool
	held     chan struct{} // closed when a query is held
	release  chan struct{}
	heldOnce sync.Once
}

func (h *holdCandidates) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if h.armed.Load() && strings.Contains(d.SQL, "FROM opsq.chunks c") {
		return context.WithValue(ctx, holdCandidates{}, true)
	}
	return ctx
}

func (h *holdCandidates) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(holdCandidates{}) == nil {
		return
	}
	first := false
	h.heldOnce.Do(func() { first = true })
	if first {
		close(h.held)
		<-h.release
	}
}

// TestStaleEmptyScanKeepsShardsAvailable: a scan that read its (empty) candidates before
// new work was announced, and ends after, must not mark the shards empty: they would be
// published as empty, and the other instances' waiters, once the NOTIFY's tips are stale,
// would have nowhere to forward to while the chunks stay free here. Before, it did (the
// bench's last parked consumers: a join-time look held up by thousands of others ended
// after the chunks arrived).
func TestStaleEmptyScanKeepsShardsAvailable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	hold := &holdCandidates{held: make(chan struct{}), release: make(chan struct{})}
	cfg.ConnConfig.Tracer = hold // the candidate pool copies it
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := startQueuer(t, pool)

	hold.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		// oldest_first: one ordered query, whose empty answer ends the scan.
		chunks, err := reserveHere(t.Context(), q, ReserveRequest{Max: 1, Lease: time.Minute, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
		if err == nil && len(chunks) > 0 {
			err = errors.New("the scan held before the submission found a chunk")
		}
		done <- err
	}()
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no candidate query within 30s")
	}
	before := q.router.Announced()
	id := submitN(t, q, 1, NewSubmission{})
	shard := opsqtype.ShardOf(id, 0, q.shardCount)
	pgtest.Eventually(t, 10*time.Second, "the submission's NOTIFY handled", func() bool {
		return q.router.Announced() != before // the submission's NOTIFY has come back
	})
	close(hold.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !q.router.Available(shard) {
		t.Fatalf("shard %d, with a free chunk, is marked empty by a scan that read it before the chunk came", shard)
	}
}
