package queuer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

func submitN(t *testing.T, q *Queuer, n int, sub NewSubmission) int64 {
	t.Helper()
	c, err := q.Submit(t.Context(), sub, &genChunks{n: n, failAt: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

func TestStatusUnknown(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	if _, err := q.Status(t.Context(), 12345); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Status of an unknown id: err = %v; want ErrNotFound", err)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 300, NewSubmission{})
	st, err := q.Cancel(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateCancelled || st.FinishedAt == nil {
		t.Fatalf("after Cancel: %+v; want cancelled with finished_at", st)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1", id); n != 0 {
		t.Errorf("%d chunks left reservable after cancel; want 0", n)
	}
	if _, err := q.Cancel(t.Context(), id); !errors.Is(err, ErrFinished) {
		t.Errorf("second Cancel: err = %v; want ErrFinished", err)
	}
	if _, err := q.Cancel(t.Context(), id+1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel of an unknown id: err = %v; want ErrNotFound", err)
	}
}

func TestWaitFinishedIsWokenByNotify(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	// A second instance cancels: the waiter's instance learns of it only by NOTIFY.
	other := startQueuer(t, q.cfg.Pool)
	id := submitN(t, q, 10, NewSubmission{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan Status, 1)
	errs := make(chan error, 1)
	go func() {
		st, err := q.WaitFinished(ctx, id, time.Minute) // longer than ctx: only a wake-up ends it in time
		got <- st
		errs <- err
	}()
	// Cancel only once the waiter is registered, so that the NOTIFY is what wakes it.
	pgtest.Eventually(t, 20*time.Second, "the waiter registers", func() bool { return q.waiting.Waiting() > 0 })
	if _, err := other.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	st, err := <-got, <-errs
	if err != nil {
		t.Fatalf("WaitFinished: %v; want to be woken by the cancel's NOTIFY", err)
	}
	if st.State != opsqtype.StateCancelled {
		t.Fatalf("WaitFinished returned state %s; want cancelled", st.State)
	}
}

func TestWaitFinishedTimesOut(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 1, NewSubmission{})
	st, err := q.WaitFinished(t.Context(), id, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != opsqtype.StateInProgress {
		t.Fatalf("state %s; want in_progress after the wait ran out", st.State)
	}
}

func TestResultsInChunkOrder(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 500, NewSubmission{})
	pgtest.CompleteSubmission(t, pool, id)
	next := int64(0)
	err := q.Results(t.Context(), id, func(r Result) error {
		idx, output := r.ChunkIndex, r.Output
		if idx != next {
			return fmt.Errorf("chunk %d; want %d", idx, next)
		}
		if want := fmt.Sprintf("out-%d", idx); string(output) != want {
			return fmt.Errorf("chunk %d output %q; want %q", idx, output, want)
		}
		next++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != 500 {
		t.Fatalf("%d results; want 500", next)
	}
}

func TestListByStateAndMetadata(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	var company42 []int64
	for i := range 7 {
		sm := fmt.Sprintf(`{"company_id": %d}`, 42+i%2)
		id := submitN(t, q, 1, NewSubmission{StrategicMetadata: json.RawMessage(sm)})
		if i%2 == 0 {
			company42 = append(company42, id)
		}
	}
	stringID := submitN(t, q, 1, NewSubmission{StrategicMetadata: json.RawMessage(`{"company_id": "42"}`)})
	pgtest.CompleteSubmission(t, pool, company42[0])

	// Pages of 2, newest first, of company_id = 42 (the integer; the string "42" is another value).
	var got []int64
	var after int64
	for page := 0; ; page++ {
		list, more, err := q.List(t.Context(), ListOptions{Key: "company_id", Value: json.RawMessage("42"), Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range list {
			got = append(got, st.ID)
		}
		if !more {
			break
		}
		after = list[len(list)-1].ID
		if page > 10 {
			t.Fatal("pagination does not end")
		}
	}
	want := []int64{company42[3], company42[2], company42[1], company42[0]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("company_id=42 pages: %v; want %v", got, want)
	}

	list, _, err := q.List(t.Context(), ListOptions{State: opsqtype.StateCompleted, Key: "company_id", Value: json.RawMessage("42"), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != company42[0] {
		t.Fatalf("completed with company_id=42: %v; want only %d", list, company42[0])
	}
	list, _, err = q.List(t.Context(), ListOptions{Key: "company_id", Value: json.RawMessage(`"42"`), Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != stringID {
		t.Fatalf("company_id=\"42\": %d submissions; want only %d", len(list), stringID)
	}
	list, more, err := q.List(t.Context(), ListOptions{State: opsqtype.StateInProgress, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 7 || more {
		t.Fatalf("in progress: %d submissions (more %v); want 7", len(list), more)
	}
	for i := 1; i < len(list); i++ {
		if list[i].ID >= list[i-1].ID {
			t.Fatalf("list not newest first: %d after %d", list[i].ID, list[i-1].ID)
		}
	}
}
