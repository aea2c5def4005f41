package handout

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/internal/waiters"
	"opsq/sql/pgtest"
)

// TestResumeCutSlices: a fail's move by slices cut after its first slice (its instance
// stopped or died: here held) is finished by another instance's resume job: every chunk
// ends in chunks_failed and the counts add up to the total; when the first mover goes on,
// its slices find nothing left and count nothing twice. And a cancelled row whose chunks
// are all gone but whose counts fall short (cancelled before migration 00007 counted
// skipped chunks) is settled, so that the job does not take it up again.
func TestResumeCutSlices(t *testing.T) {
	t.Parallel()
	const slice, total = 1000, 5500
	e, gate, id, _, _ := failSliced(t, slice, total)
	ctx, pool := t.Context(), e.pool
	gate.next(t, "the first slice of the fail's move")

	other := submissions.New(submissions.Config{Pool: pool, ShardCount: e.path.shardCount, Log: pgtest.Logger(t, slog.LevelWarn), Now: time.Now,
		IDs: submissions.NewIDs(), Admission: waiters.New(0, 0), SliceRows: slice, ResumeAfter: time.Millisecond})
	counted := func() (done, failed, skipped, tot int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT chunks_done, chunks_failed, chunks_skipped, chunks_total
			FROM opsq.submissions_failed WHERE id = $1`, id).Scan(&done, &failed, &skipped, &tot); err != nil {
			t.Fatal(err)
		}
		return
	}
	if d, f, s, n := counted(); d+f+s >= n {
		t.Fatalf("while the move is held: %d done + %d failed + %d skipped of %d; want it short", d, f, s, n)
	}
	other.ResumeSlices(ctx)
	expectMoved := func(when string) {
		t.Helper()
		if d, f, s, n := counted(); d != 0 || f != 1 || s != total-1 || n != total {
			t.Errorf("%s: %d done, %d failed, %d skipped of %d; want 0, 1, %d of %d", when, d, f, s, n, total-1, total)
		}
		pending := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.chunks WHERE submission_id = $1) + "+
			"(SELECT count(*) FROM opsq.chunks_waiting WHERE submission_id = $1)", id)
		rows := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_failed WHERE submission_id = $1", id)
		if pending != 0 || rows != total {
			t.Errorf("%s: %d chunks pending, %d in chunks_failed; want 0 and %d", when, pending, rows, total)
		}
	}
	expectMoved("after the resume")

	close(gate.open) // the first mover goes on: its slices find nothing left
	for done := int64(0); done < total; {
		done = gate.next(t, "the first mover's remaining slices")
	}
	expectMoved("after the first mover's last slice")

	// A cancelled row with nothing pending and its counts short is settled.
	const legacy = 987654321
	if _, err := pool.Exec(ctx, `INSERT INTO opsq.submissions_cancelled (id, chunks_total, chunks_done, priority, max_retries,
		metadata, strategic_metadata, created_at, finished_at) VALUES ($1, 10, 4, 0, 3, '', '{}', now() - interval '2 h', now() - interval '1 h')`, legacy); err != nil {
		t.Fatal(err)
	}
	other.ResumeSlices(ctx)
	if n := pgtest.Count(t, pool, "SELECT chunks_skipped FROM opsq.submissions_cancelled WHERE id = $1", legacy); n != 6 {
		t.Errorf("a cancelled row with nothing pending, 4 of 10 done, 0 skipped: %d skipped after the resume; want 6", n)
	}
	if n := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.submissions_failed WHERE chunks_done + chunks_failed + chunks_skipped < chunks_total) "+
		"+ (SELECT count(*) FROM opsq.submissions_cancelled WHERE chunks_done + chunks_failed + chunks_skipped < chunks_total)"); n != 0 {
		t.Errorf("%d ended submissions still short of their total", n)
	}
}

// TestResumeRemovesDeadIngest: an object-storage submission going in by slices whose
// instance is gone (here never registered: a dead one) is taken for dead by another
// instance's resume job, which removes its committed slices and its record; and should the
// first instance go on after all, its last transaction finds its record gone and refuses
// the submission, removing what it inserted, rather than create one with chunks missing.
func TestResumeRemovesDeadIngest(t *testing.T) {
	t.Parallel()
	const slice, total = 1000, 5000
	gate := newSliceGate(t)
	pool := pgtest.NewPool(t)
	e := startEngineWith(t, pool, func(c *submissions.Config) {
		c.SliceRows = slice
		c.AfterSlice = gate.after
		c.Instance = "an-instance-that-died"
	})
	ctx := t.Context()
	type result struct {
		created submissions.Created
		err     error
	}
	submitted := make(chan result, 1)
	go func() {
		c, err := e.subs.Submit(ctx, submissions.NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: total}, nil)
		submitted <- result{c, err}
	}()
	var opened sync.Once
	open := func() { opened.Do(func() { close(gate.open) }) }
	t.Cleanup(func() {
		open()
		<-submitted
	})
	gate.next(t, "the first slice of the ingest")
	var id int64
	if err := pool.QueryRow(ctx, "SELECT submission_id FROM opsq.ingests").Scan(&id); err != nil {
		t.Fatalf("the ingest's record: %v", err)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id); n != slice {
		t.Fatalf("%d chunks after the first slice; want %d", n, slice)
	}

	other := submissions.New(submissions.Config{Pool: pool, ShardCount: e.path.shardCount, Log: pgtest.Logger(t, slog.LevelWarn), Now: time.Now,
		IDs: submissions.NewIDs(), Admission: waiters.New(0, 0), SliceRows: slice, Instance: "resumer"})
	other.ResumeSlices(ctx)
	if n := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.chunks WHERE submission_id = $1) + "+
		"(SELECT count(*) FROM opsq.ingests)", id); n != 0 {
		t.Fatalf("after the resume: %d chunks and records of the dead ingest left; want none", n)
	}

	open() // it was not dead after all: it goes on, and must not create the submission
	r := <-submitted
	submitted <- r
	if r.err == nil || !strings.Contains(r.err.Error(), "taken for dead") {
		t.Errorf("the ingest that went on after its slices were removed: %+v, %v; want refused, taken for dead", r.created, r.err)
	}
	if n := pgtest.Count(t, pool, "SELECT (SELECT count(*) FROM opsq.chunks WHERE submission_id = $1) + "+
		"(SELECT count(*) FROM opsq.submission_status WHERE id = $1) + (SELECT count(*) FROM opsq.ingests)", id); n != 0 {
		t.Errorf("after the refused ingest: %d chunks, submission rows or records left; want none", n)
	}
}
