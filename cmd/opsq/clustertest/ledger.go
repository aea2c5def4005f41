package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
)

// ChunkKey names a chunk.
type ChunkKey struct {
	Sub int64 // submission id
	Idx int64 // chunk index
}

func (k ChunkKey) String() string { return fmt.Sprintf("%d/%d", k.Sub, k.Idx) }

// KeyOf returns the chunk a reserved chunk names.
func KeyOf(ch wire.ReservedChunk) ChunkKey {
	sid, _ := strconv.ParseInt(ch.SubmissionID, 10, 64)
	return ChunkKey{sid, ch.ChunkIndex}
}

// Delivery is one reservation of a chunk handed to a consumer.
type Delivery struct {
	Token    string
	Via      string // the URL the consumer asked
	Consumer string
}

// Ledger records the submissions of a test, every delivery of their chunks and every
// completion answer, and checks at the end against the database that every chunk was
// completed exactly once, with the output of a token that was delivered for it, and every
// submission completed (Verify, Check). It owns only its records; it starts no goroutine.
// Safe for concurrent use.
type Ledger struct {
	mu         sync.Mutex
	totals     map[int64]int64 // submission -> chunks_total
	deliveries map[ChunkKey][]Delivery
	completed  map[ChunkKey][]string // tokens whose completion answered "completed"
	problems   []string
	delivered  atomic.Int64
	done       atomic.Int64 // "completed" answers
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{totals: map[int64]int64{}, deliveries: map[ChunkKey][]Delivery{}, completed: map[ChunkKey][]string{}}
}

// Problem records something wrong seen by a consumer or producer; Verify reports it.
func (l *Ledger) Problem(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// AddSubmission records a submission of total chunks whose chunk i has the input "i".
func (l *Ledger) AddSubmission(id string, total int64) {
	sid, _ := strconv.ParseInt(id, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.totals[sid] = total
}

// SubmissionIDs returns the recorded submissions, in order.
func (l *Ledger) SubmissionIDs() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.totals))
	for id := range l.totals {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// Delivered is the number of deliveries recorded.
func (l *Ledger) Delivered() int64 { return l.delivered.Load() }

// Done is the number of completions answered "completed".
func (l *Ledger) Done() int64 { return l.done.Load() }

// Deliver records a reserved chunk handed to consumer through via, and checks its input
// (chunk i's input is "i").
func (l *Ledger) Deliver(ch wire.ReservedChunk, via, consumer string) ChunkKey {
	if _, err := strconv.ParseInt(ch.SubmissionID, 10, 64); err != nil {
		l.Problem("chunk with submission id %q", ch.SubmissionID)
	}
	k := KeyOf(ch)
	if ch.Input == nil || *ch.Input != strconv.FormatInt(ch.ChunkIndex, 10) {
		l.Problem("chunk %s delivered with input %v; want %q", k, ch.Input, strconv.FormatInt(ch.ChunkIndex, 10))
	}
	l.delivered.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deliveries[k] = append(l.deliveries[k], Delivery{Token: ch.Token, Via: via, Consumer: consumer})
	return k
}

// Answered records the answer to the completion of chunk k with token.
func (l *Ledger) Answered(k ChunkKey, token string, status wire.TokenStatus) {
	switch status {
	case wire.StatusCompleted:
		l.done.Add(1)
		l.mu.Lock()
		l.completed[k] = append(l.completed[k], token)
		l.mu.Unlock()
	case wire.StatusAlreadyFinished:
	default:
		l.Problem("completing chunk %s answered %q", k, status)
	}
}

// DeliveriesOf returns how many times chunk k was delivered.
func (l *Ledger) DeliveriesOf(k ChunkKey) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.deliveries[k])
}

// Stats sums up a ledger.
type Stats struct {
	Submissions int
	Chunks      int64 // chunks of the submissions
	Deliveries  int
	Duplicates  int      // deliveries of a chunk after its first
	Redelivered int      // chunks delivered more than once
	Examples    []string // up to 5 chunks delivered more than once, with who got them
}

func (st Stats) String() string {
	ex := ""
	if len(st.Examples) > 0 {
		ex = "; e.g. " + strings.Join(st.Examples, "; ")
	}
	return fmt.Sprintf("%d submissions, %d chunks, %d deliveries, %d duplicate deliveries (%d chunks handed out more than once)%s",
		st.Submissions, st.Chunks, st.Deliveries, st.Duplicates, st.Redelivered, ex)
}

// Verify compares the ledger with the database: every submission completed; for each,
// chunks_total rows in chunks_completed, one per index, each with the output of a token
// delivered for that chunk; nothing left in chunks or chunks_failed; no chunk answered
// "completed" twice; no chunk completed without a delivery. It returns the duplicates,
// and what is wrong (with the problems recorded); err is for a failed query.
func (l *Ledger) Verify(ctx context.Context, db *pgxpool.Pool) (st Stats, wrong []string, err error) {
	ids := l.SubmissionIDs()
	l.mu.Lock()
	defer l.mu.Unlock()
	wrong = append(wrong, l.problems...)

	rows, err := db.Query(ctx, `SELECT id FROM opsq.submissions_completed WHERE id = ANY($1)`, ids)
	if err != nil {
		return st, nil, fmt.Errorf("reading submissions_completed: %w", err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return st, nil, fmt.Errorf("reading submissions_completed: %w", err)
	}
	for _, id := range ids {
		if !slices.Contains(done, id) {
			var state string
			_ = db.QueryRow(ctx, `SELECT state FROM opsq.submission_status WHERE id = $1`, id).Scan(&state)
			wrong = append(wrong, fmt.Sprintf("submission %d is %q; want completed", id, state))
		}
	}

	var left int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM opsq.chunks WHERE submission_id = ANY($1)`, ids).Scan(&left); err != nil {
		return st, nil, fmt.Errorf("counting opsq.chunks: %w", err)
	}
	if left > 0 {
		wrong = append(wrong, fmt.Sprintf("%d chunks left in opsq.chunks; want 0", left))
	}
	var failed int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = ANY($1)`, ids).Scan(&failed); err != nil {
		return st, nil, fmt.Errorf("counting opsq.chunks_failed: %w", err)
	}
	if failed > 0 {
		wrong = append(wrong, fmt.Sprintf("%d chunks in opsq.chunks_failed; want 0", failed))
	}

	perSub := map[int64]map[int64]bool{}
	rows, err = db.Query(ctx, `SELECT submission_id, chunk_index, output FROM opsq.chunks_completed WHERE submission_id = ANY($1)`, ids)
	if err != nil {
		return st, nil, fmt.Errorf("reading chunks_completed: %w", err)
	}
	var k ChunkKey
	var output []byte
	_, err = pgx.ForEachRow(rows, []any{&k.Sub, &k.Idx, &output}, func() error {
		if perSub[k.Sub] == nil {
			perSub[k.Sub] = map[int64]bool{}
		}
		if perSub[k.Sub][k.Idx] {
			wrong = append(wrong, fmt.Sprintf("chunk %s completed twice in chunks_completed", k))
		}
		perSub[k.Sub][k.Idx] = true
		if k.Idx < 0 || k.Idx >= l.totals[k.Sub] {
			wrong = append(wrong, fmt.Sprintf("chunk %s completed but the submission has %d chunks", k, l.totals[k.Sub]))
		}
		ds := l.deliveries[k]
		if len(ds) == 0 {
			wrong = append(wrong, fmt.Sprintf("chunk %s completed but never delivered to a consumer of the test", k))
		} else if !slices.ContainsFunc(ds, func(d Delivery) bool { return d.Token == string(output) }) {
			wrong = append(wrong, fmt.Sprintf("chunk %s completed with output %q, which is none of its delivered tokens", k, output))
		}
		if n := len(l.completed[k]); n > 1 {
			wrong = append(wrong, fmt.Sprintf("chunk %s: %d completions answered %q; want 1", k, n, wire.StatusCompleted))
		}
		return nil
	})
	if err != nil {
		return st, nil, fmt.Errorf("reading chunks_completed: %w", err)
	}
	for _, id := range ids {
		if got := int64(len(perSub[id])); got != l.totals[id] {
			wrong = append(wrong, fmt.Sprintf("submission %d: %d chunks in chunks_completed; want %d (lost %d)", id, got, l.totals[id], l.totals[id]-got))
		}
	}

	st.Submissions = len(ids)
	for _, n := range l.totals {
		st.Chunks += n
	}
	for k, ds := range l.deliveries {
		st.Deliveries += len(ds)
		if len(ds) > 1 {
			st.Duplicates += len(ds) - 1
			st.Redelivered++
			if len(st.Examples) < 5 {
				var vias []string
				for _, d := range ds {
					vias = append(vias, d.Consumer+"@"+d.Via)
				}
				st.Examples = append(st.Examples, fmt.Sprintf("%s ×%d (%s)", k, len(ds), strings.Join(vias, ", ")))
			}
		}
	}
	return st, wrong, nil
}

// Check is Verify for a test: it logs the stats and fails t with what is wrong.
func (l *Ledger) Check(t testing.TB, ctx context.Context, db *pgxpool.Pool) Stats {
	t.Helper()
	st, wrong, err := l.Verify(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ledger: %s", st)
	if len(wrong) > 0 {
		if len(wrong) > 30 {
			wrong = append(wrong[:30], fmt.Sprintf("… and %d more", len(wrong)-30))
		}
		t.Errorf("ledger check failed:\n  %s", strings.Join(wrong, "\n  "))
	}
	return st
}
