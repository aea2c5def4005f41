package submissions

import (
	"errors"
	"testing"
	"time"
)

// TestMovesOneAtATimeAndWithinTheMinute: a second pause or resume of a submission while one
// runs is refused (Moving); a key past its bound waits until enough of its minute has
// passed, and its moves of more than a minute ago no longer count.
func TestMovesOneAtATimeAndWithinTheMinute(t *testing.T) {
	t.Parallel()
	var m moves
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := m.begin("k", 1, 100, now); err != nil {
		t.Fatal(err)
	}
	var busy *MoveBusyError
	if err := m.begin("other", 1, 100, now); !errors.As(err, &busy) || !busy.Moving {
		t.Fatalf("a second move of submission 1 while one runs: %v; want a MoveBusyError, Moving", err)
	}
	m.end("k", 1, 60, now)
	if err := m.begin("k", 2, 100, now.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	m.end("k", 2, 50, now.Add(10*time.Second)) // 110 in the minute
	err := m.begin("k", 3, 100, now.Add(20*time.Second))
	if !errors.As(err, &busy) || busy.Moving || busy.Moved != 110 {
		t.Fatalf("past the bound: %v; want a MoveBusyError of 110 moved", err)
	}
	if busy.RetryAfter != 40*time.Second { // when the 60 of time 0 leave the window
		t.Errorf("retry after %s; want 40s", busy.RetryAfter)
	}
	if err := m.begin("k", 3, 100, now.Add(61*time.Second)); err != nil {
		t.Errorf("a minute after the first move: %v; want it allowed (50 in the window)", err)
	}
}
