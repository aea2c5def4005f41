package strategy

import "testing"

func TestBefore(t *testing.T) {
	t.Parallel()
	a := Position{Priority: -5, SubmissionID: 10, ChunkIndex: 3}
	for _, c := range []struct {
		name string
		leaf Kind
		a, b Position
		want bool
	}{
		{"oldest_first: lower submission", OldestFirst, a, Position{SubmissionID: 11}, true},
		{"oldest_first: same submission, lower chunk", OldestFirst, a, Position{SubmissionID: 10, ChunkIndex: 4}, true},
		{"oldest_first: itself", OldestFirst, a, a, false},
		{"newest_first: higher submission", NewestFirst, a, Position{SubmissionID: 9}, true},
		{"newest_first: same submission, higher chunk", NewestFirst, a, Position{SubmissionID: 10, ChunkIndex: 2}, true},
		{"newest_first: lower submission", NewestFirst, a, Position{SubmissionID: 11}, false},
		{"custom_priority: higher priority first", CustomPriority, a, Position{Priority: -4, SubmissionID: 1}, true},
		{"custom_priority: lower priority later", CustomPriority, a, Position{Priority: -6, SubmissionID: 99}, false},
		{"custom_priority: same priority, by key", CustomPriority, a, Position{Priority: -5, SubmissionID: 10, ChunkIndex: 4}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := before(c.leaf, c.a, c.b); got != c.want {
				t.Errorf("before(%s, %+v, %+v) = %t; want %t", c.leaf, c.a, c.b, got, c.want)
			}
		})
	}
}

// args returns the keyset arguments of the cursor's next batch.
func args(s *Cursor) (afterSub int64, afterChunk int32, afterOrder, beforeOrder int, afterPriority int64) {
	a := s.Args(7)
	return a["after_submission"].(int64), a["after_chunk"].(int32), a["after_order"].(int), a["before_order"].(int), a["after_priority"].(int64)
}

func TestCursorOrderedStart(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		leaf      Kind
		sub       int64
		chunk     int32
		priority  int64
		wantFirst bool // a row of submission 1, chunk 0 is after the start
	}{
		{OldestFirst, 0, 0, 0, true},
		{NewestFirst, 1<<63 - 1, 1<<31 - 1, 0, true},
		{CustomPriority, 0, -1, -(1<<63 - 1), true},
	} {
		t.Run(string(c.leaf), func(t *testing.T) {
			s := NewCursor(c.leaf)
			sub, chunk, _, _, prio := args(s)
			if sub != c.sub || chunk != c.chunk || prio != c.priority {
				t.Errorf("start = (%d, %d, priority %d); want (%d, %d, priority %d)", sub, chunk, prio, c.sub, c.chunk, c.priority)
			}
			if s.Exhausted() {
				t.Error("an ordered scan not resumed: Exhausted = true; want false (one range only)")
			}
			if s.Wrapped() || s.Done() {
				t.Errorf("Wrapped, Done = %t, %t; want false, false", s.Wrapped(), s.Done())
			}
		})
	}
}

func TestCursorSaw(t *testing.T) {
	t.Parallel()
	s := NewCursor(CustomPriority)
	s.Saw(Position{Priority: -3, SubmissionID: 42, ChunkIndex: 7}, 999)
	sub, chunk, order, _, prio := args(s)
	if sub != 42 || chunk != 7 || order != 999 || prio != -3 {
		t.Errorf("after Saw: (%d, %d, order %d, priority %d); want (42, 7, order 999, priority -3)", sub, chunk, order, prio)
	}
}

func TestCursorResumeWrapsAround(t *testing.T) {
	t.Parallel()
	s := NewCursor(OldestFirst)
	at := Position{SubmissionID: 50, ChunkIndex: 5}
	s.ResumeAt(at)
	if sub, chunk, _, _, _ := args(s); sub != 50 || chunk != 5 {
		t.Fatalf("resumed at (%d, %d); want (50, 5)", sub, chunk)
	}
	if s.PassedResume(Position{SubmissionID: 60}) {
		t.Fatal("a row of the first range passed the resume position; want only rows of the second range to")
	}
	if !s.Exhausted() {
		t.Fatal("the first range of a resumed scan exhausted: Exhausted = false; want true (the beginning follows)")
	}
	if !s.Wrapped() {
		t.Fatal("Wrapped = false after the first range; want true")
	}
	if sub, chunk, _, _, _ := args(s); sub != 0 || chunk != 0 {
		t.Fatalf("second range starts at (%d, %d); want the beginning (0, 0)", sub, chunk)
	}
	if s.PassedResume(Position{SubmissionID: 49}) {
		t.Error("a row before the resume position passed it")
	}
	if !s.PassedResume(at) {
		t.Error("the row at the resume position did not pass it; want the scan done there")
	}
	if !s.Done() || !s.PassedResume(Position{SubmissionID: 1}) {
		t.Error("after passing the resume position: want Done, and every later row passed")
	}
	if s.Exhausted() {
		t.Error("the second range exhausted: Exhausted = true; want false (nothing follows)")
	}
}

func TestCursorRandomCutsTheDeck(t *testing.T) {
	t.Parallel()
	for range 20 {
		s := NewCursor(Random)
		_, _, after, before, _ := args(s)
		if after < 0 || after >= randomDeck || before != randomDeck {
			t.Fatalf("first range (%d, %d); want (offset, %d) with 0 <= offset < %d", after, before, randomDeck, randomDeck)
		}
		offset := after
		s.Saw(Position{SubmissionID: 3, ChunkIndex: 1}, offset+1)
		if !s.Exhausted() {
			if offset == 0 {
				continue // the deck was cut at its beginning: one range only
			}
			t.Fatalf("offset %d: Exhausted = false after the first range; want the second range", offset)
		}
		sub, chunk, after, before, _ := args(s)
		if after != -1 || before != offset || sub != 0 || chunk != 0 {
			t.Errorf("second range (order > %d, < %d, after (%d, %d)); want (> -1, < %d, after (0, 0))", after, before, sub, chunk, offset)
		}
		if s.Exhausted() {
			t.Error("the second range exhausted: Exhausted = true; want false")
		}
	}
}
