package submissions

import (
	"errors"
	"testing"
	"time"
)

func TestIDGenerator(t *testing.T) {
	t.Parallel()
	g := NewIDs()
	if _, err := g.Next(); !errors.Is(err, ErrNodeLease) {
		t.Fatalf("next before setNode: err = %v; want ErrNodeLease", err)
	}
	g.SetNode(513, time.Now().Add(time.Minute))
	seen := map[int64]bool{}
	var last int64
	for range 20000 { // more than 4096 per millisecond is likely: exercises the wait
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if id <= last {
			t.Fatalf("id %d after %d; want increasing ids", id, last)
		}
		if seen[id] {
			t.Fatalf("id %d made twice", id)
		}
		seen[id], last = true, id
		if node := id >> sequenceBits & maxNode; node != 513 {
			t.Fatalf("id %d carries node %d; want 513", id, node)
		}
	}
	if d := time.Since(IDTime(last)); d < 0 || d > time.Second {
		t.Errorf("idTime of the last id is %s ago; want within a second", d)
	}
}

func TestIDGeneratorClockBackwards(t *testing.T) {
	t.Parallel()
	g := NewIDs()
	g.SetNode(1, time.Now().Add(time.Hour))
	now := time.Now()
	g.now = func() time.Time { return now }
	first, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	// The clock steps back 2 ms, then resumes; ids must keep increasing all the same.
	steps := []time.Time{now.Add(-2 * time.Millisecond), now.Add(-time.Millisecond), now, now.Add(time.Millisecond)}
	g.now = func() time.Time {
		t := steps[0]
		if len(steps) > 1 {
			steps = steps[1:]
		}
		return t
	}
	second, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if second <= first {
		t.Fatalf("after the clock stepped back: id %d after %d; want increasing", second, first)
	}
}

func TestIDGeneratorStopsWhenTheLeaseRunsOut(t *testing.T) {
	t.Parallel()
	g := NewIDs()
	g.SetNode(1, time.Now().Add(-time.Millisecond))
	if _, err := g.Next(); !errors.Is(err, ErrNodeLease) {
		t.Fatalf("next with an expired lease: err = %v; want ErrNodeLease", err)
	}
}
