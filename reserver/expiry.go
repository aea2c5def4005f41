package reserver

import (
	"container/heap"
	"time"
)

// expiryHeap is a min-heap of live reservations ordered by expiry time, then
// by the order they were made. It implements heap.Interface and keeps each
// entry's index up to date, so that an entry can be fixed or removed in
// O(log n).
//
// Each item carries its own copy of the expiry time and sequence number, so
// that comparisons read only the heap's contiguous slice instead of chasing a
// pointer to each entry: this keeps TakeExpired, Extend and Release fast at 100 000
// live reservations for 32 bytes more per reservation.
type expiryHeap []expiryItem

type expiryItem struct {
	expiresAt time.Time
	seq       uint64
	e         *entry
}

var _ heap.Interface = (*expiryHeap)(nil)

func (h expiryHeap) Len() int { return len(h) }

func (h expiryHeap) Less(i, j int) bool {
	if c := h[i].expiresAt.Compare(h[j].expiresAt); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}

func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].e.index = i
	h[j].e.index = j
}

// push adds it to the heap. It does what heap.Push does without boxing the
// item in an interface, which would cost an allocation per reservation.
func (h *expiryHeap) push(it expiryItem) {
	it.e.index = len(*h)
	*h = append(*h, it)
	heap.Fix(h, it.e.index)
}

// Push appends x, an expiryItem; use push, not this method.
func (h *expiryHeap) Push(x any) {
	it := x.(expiryItem)
	it.e.index = len(*h)
	*h = append(*h, it)
}

// Pop removes the last item and returns its entry; use heap.Pop or
// heap.Remove, not this method.
func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old) - 1
	e := old[n].e
	old[n] = expiryItem{} // let the entry be collected
	e.index = -1
	*h = old[:n]
	return e
}
