package handout

import (
	"testing"

	"opsq/queuer/internal/submissions"
	"opsq/reserver"
)

// TestInfoReadOvertakenByACancel: a miss's read of a submission's info that a cancel
// overtakes (the cancel commits and forgets the submission after the read began) is read
// again: the submission is neither answered nor cached as in progress, so that no chunk a
// cancel by slices has not moved yet is handed out for one of a submission in progress.
func TestInfoReadOvertakenByACancel(t *testing.T) {
	t.Parallel()
	e, pool := setup(t)
	ctx := t.Context()
	id := submitN(t, e, 10, submissions.NewSubmission{})
	c := newInfoCache(pool)
	reads := 0
	c.afterRead = func() {
		reads++
		if reads == 1 {
			if _, err := e.subs.Cancel(ctx, id); err != nil {
				t.Error(err)
			}
			c.forget(id) // as the engine's SubmissionDropped does
		}
	}
	infos, err := c.get(ctx, []candidate{{key: reserver.Key{SubmissionID: id}}})
	if err != nil {
		t.Fatal(err)
	}
	if reads != 2 {
		t.Errorf("%d reads; want 2, the second after the cancel", reads)
	}
	if infos[id] != nil {
		t.Errorf("submission %d answered as in progress after its cancel overtook the read", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.byID[id] != nil {
		t.Errorf("submission %d cached as in progress after its cancel overtook the read", id)
	}
}

// TestInfoReadsBounded: forgets that keep overtaking a miss's read make it read again at
// most infoRereads times; the last read is answered and not cached.
func TestInfoReadsBounded(t *testing.T) {
	t.Parallel()
	e, pool := setup(t)
	id := submitN(t, e, 10, submissions.NewSubmission{})
	c := newInfoCache(pool)
	reads := 0
	c.afterRead = func() {
		reads++
		c.forget(-1) // another submission, each time
	}
	infos, err := c.get(t.Context(), []candidate{{key: reserver.Key{SubmissionID: id}}})
	if err != nil {
		t.Fatal(err)
	}
	if reads != infoRereads+1 {
		t.Errorf("%d reads; want %d", reads, infoRereads+1)
	}
	if infos[id] == nil {
		t.Errorf("submission %d, in progress, not answered", id)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.byID[id] != nil {
		t.Errorf("submission %d cached from a read forgets overtook", id)
	}
}
