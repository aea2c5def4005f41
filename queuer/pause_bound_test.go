package queuer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"opsq/queuer/identity"
	"opsq/sql/pgtest"
)

// TestPauseResumeBoundedPerKey: the chunks one key moves by pauses and resumes in a minute
// are bounded; past the bound a pause or resume is refused with a MoveBusyError saying
// when to come back and what to do, changes nothing, and another key is not held back
// (issue 31, finding 12: 9 pauses and 9 resumes of 10^6 chunks wrote 6.8 GB of WAL).
func TestPauseResumeBoundedPerKey(t *testing.T) {
	t.Parallel()
	q := startQueuerWith(t, pgtest.NewPool(t), func(cfg *Config) { cfg.MaxPauseChunksPerMinute = 15 })
	id := submitN(t, q, 10, NewSubmission{})
	alice := identity.With(t.Context(), identity.Caller{Name: "alice", Role: "producer", Tenant: "default"})
	bob := identity.With(t.Context(), identity.Caller{Name: "bob", Role: "producer", Tenant: "default"})

	if _, err := q.Pause(alice, id); err != nil { // 10 moved
		t.Fatal(err)
	}
	if _, err := q.Resume(alice, id); err != nil { // 20: at the bound, but it was under it
		t.Fatal(err)
	}
	_, err := q.Pause(alice, id)
	var busy *MoveBusyError
	if !errors.As(err, &busy) {
		t.Fatalf("a third move of 10 chunks past a bound of 15: %v; want a MoveBusyError", err)
	}
	if busy.Moving || busy.Moved != 20 || busy.Limit != 15 || busy.RetryAfter < time.Second || busy.RetryAfter > time.Minute {
		t.Errorf("refusal %+v; want 20 moved of 15, retry after 1 s to 1 min", busy)
	}
	if msg := busy.Error(); !strings.Contains(msg, "OPSQ_MAX_PAUSE_CHUNKS_PER_MINUTE") || !strings.Contains(msg, "again in") {
		t.Errorf("message %q; want it to name the setting and when to come back", msg)
	}
	if st, err := q.Status(t.Context(), id); err != nil || st.Paused {
		t.Errorf("after the refused pause: paused %v (%v); want not paused", st.Paused, err)
	}
	// Another key has its own share; a pause of nothing to move costs nothing.
	if st, err := q.Pause(bob, id); err != nil || !st.Paused {
		t.Fatalf("bob's pause: %+v, %v; want paused", st, err)
	}
	if _, err := q.Pause(bob, id); err != nil {
		t.Fatalf("bob's second pause, which moves nothing: %v", err)
	}
	if _, err := q.Resume(bob, id); err != nil {
		t.Fatalf("bob's resume, at 10 of 15: %v", err)
	}
}
