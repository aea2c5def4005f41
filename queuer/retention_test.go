package queuer

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	ctx := t.Context()
	sm := NewSubmission{StrategicMetadata: json.RawMessage(`{"k": 1}`),
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	done := submitN(t, q, 12000, sm) // more than one deletion batch of chunk rows
	pgtest.CompleteSubmission(t, pool, done)
	sm.IdempotencyKey = "cancel-me"
	cancelled := submitN(t, q, 10, sm)
	if _, err := q.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	sm.IdempotencyKey = ""
	running := submitN(t, q, 10, sm)

	// Nothing is past the 24 h retention yet.
	if n, err := q.subs.DeleteExpired(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("DeleteExpired now = %d, %v; want 0", n, err)
	}
	n, err := q.subs.DeleteExpired(ctx, time.Now().Add(25*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("DeleteExpired 25 h later deleted %d submissions; want 2", n)
	}
	for _, id := range []int64{done, cancelled} {
		if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_status WHERE id = $1", id); c != 0 {
			t.Errorf("submission %d still there", id)
		}
		if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.strategic_metadata WHERE submission_id = $1", id); c != 0 {
			t.Errorf("strategic metadata of %d still there", id)
		}
		if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_traces WHERE id = $1", id); c != 0 {
			t.Errorf("traceparent of %d still there", id)
		}
	}
	if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submission_traces WHERE id = $1", running); c != 1 {
		t.Errorf("in-progress submission has %d traceparent rows after retention; want 1", c)
	}
	if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks_completed"); c != 0 {
		t.Errorf("%d completed chunk rows left; want 0", c)
	}
	if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.idempotency_keys"); c != 0 {
		t.Errorf("%d idempotency keys left; want 0", c)
	}
	if st, err := q.Status(ctx, running); err != nil || st.State != opsqtype.StateInProgress {
		t.Errorf("in-progress submission after retention: %v, %v; want untouched", st.State, err)
	}
	if c := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", running); c != 10 {
		t.Errorf("in-progress submission has %d chunks after retention; want 10", c)
	}
}

// TestRetentionJobCutsAtTheClock: the retention job deletes what finished before its
// clock's time minus the retention, and nothing sooner.
func TestRetentionJobCutsAtTheClock(t *testing.T) {
	t.Parallel()
	q, pool, clock := setupClock(t)
	id := submitN(t, q, 3, NewSubmission{})
	pgtest.CompleteSubmission(t, pool, id)
	q.subs.RunRetention(t.Context())
	if _, err := q.Status(t.Context(), id); err != nil {
		t.Fatalf("Status of a submission finished just now, after the retention job: %v; want it kept", err)
	}
	clock.Add(25 * time.Hour)
	q.subs.RunRetention(t.Context())
	if _, err := q.Status(t.Context(), id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Status 25 h later, after the retention job: %v; want ErrNotFound", err)
	}
}
