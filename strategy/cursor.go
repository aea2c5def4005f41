package strategy

import "math/rand/v2"

// Position is where a scan is in a leaf's order: a chunk, and for custom_priority the
// negated priority of its submission (the sort_priority column of CandidateQuery).
type Position struct {
	Priority     int64
	SubmissionID int64
	ChunkIndex   int32
}

// before reports whether a comes before b in leaf's order.
func before(leaf Kind, a, b Position) bool {
	switch leaf {
	case NewestFirst:
		return a.SubmissionID > b.SubmissionID ||
			(a.SubmissionID == b.SubmissionID && a.ChunkIndex > b.ChunkIndex)
	case CustomPriority:
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		fallthrough
	default:
		return a.SubmissionID < b.SubmissionID ||
			(a.SubmissionID == b.SubmissionID && a.ChunkIndex < b.ChunkIndex)
	}
}

// randomDeck is the number of random_order values: the deck a random scan cuts.
const randomDeck = 1 << 16

// Cursor owns the keyset position of one leaf's scan over the batches of CandidateQuery:
// each batch starts after the last row seen (Saw). A random scan cuts the deck at a random
// offset and reads [offset, 65536) then [0, offset); an ordered scan resumed at a position
// (ResumeAt) reads from there to the end, then from the beginning up to it. It lives for one
// scan and is not safe for concurrent use.
type Cursor struct {
	kind Kind
	// random: the deck is cut at offset; the first range is [offset, 65536), the second
	// [0, offset).
	offset, before int
	// ordered leaves resumed at a position: the first range runs from it to the end, the
	// second from the beginning to it.
	resume        *Position
	second        bool
	done          bool
	afterOrder    int
	afterPriority int64
	afterSub      int64
	afterChunk    int32
}

// NewCursor returns a cursor at the beginning of leaf's order (a random point of it for
// random).
func NewCursor(leaf Kind) *Cursor {
	s := &Cursor{kind: leaf}
	s.start()
	if leaf == Random {
		s.offset = rand.N(randomDeck)
		s.afterOrder, s.before = s.offset, randomDeck
	}
	return s
}

// start puts the cursor at the beginning of its order.
func (s *Cursor) start() {
	switch s.kind {
	case NewestFirst:
		s.afterSub, s.afterChunk = 1<<63-1, 1<<31-1
	case CustomPriority:
		s.afterPriority = -(1<<63 - 1)
		s.afterSub, s.afterChunk = 0, -1
	default:
		s.afterSub, s.afterChunk = 0, 0
	}
}

// ResumeAt starts an ordered scan after p, to wrap around to it at the end.
func (s *Cursor) ResumeAt(p Position) {
	s.resume = &p
	s.afterSub, s.afterChunk, s.afterPriority = p.SubmissionID, p.ChunkIndex, p.Priority
}

// PassedResume reports whether a row of the wrapped-around range is at or past the
// position the scan resumed at, where it began: then the order has been read whole.
func (s *Cursor) PassedResume(p Position) bool {
	if s.done {
		return true
	}
	if !s.second || s.resume == nil || before(s.kind, p, *s.resume) {
		return false
	}
	s.done = true
	return true
}

// Args returns the keyset arguments of CandidateQuery for the next batch of limit rows.
func (s *Cursor) Args(limit int) map[string]any {
	return map[string]any{
		"limit": limit, "after_submission": s.afterSub, "after_chunk": s.afterChunk,
		"after_order": s.afterOrder, "before_order": s.before, "after_priority": s.afterPriority,
	}
}

// Saw records the last row read: its position and random_order.
func (s *Cursor) Saw(p Position, randomOrder int) {
	s.afterSub, s.afterChunk, s.afterOrder, s.afterPriority = p.SubmissionID, p.ChunkIndex, randomOrder, p.Priority
}

// Wrapped reports whether the cursor is in its second range.
func (s *Cursor) Wrapped() bool { return s.second }

// Done reports whether a resumed scan has come back to where it began.
func (s *Cursor) Done() bool { return s.done }

// Exhausted is called when a batch came back short: the current range has no more rows.
// It reports whether another range follows: the second half of the random deck, or the
// beginning of an ordered scan that was resumed at a position.
func (s *Cursor) Exhausted() bool {
	if s.second {
		return false
	}
	switch {
	case s.kind == Random && s.offset > 0:
		s.second = true
		s.afterOrder, s.before = -1, s.offset
		s.afterSub, s.afterChunk = 0, 0
		return true
	case s.kind != Random && s.resume != nil:
		s.second = true
		s.start()
		return true
	}
	return false
}
