package waiters

import (
	"sync"
)

// ByKey owns the channels of the goroutines waiting on a key (WaitFinished: a
// submission id), and wakes them. Safe for concurrent use.
type ByKey struct {
	mu struct {
		sync.Mutex
		byKey map[int64]map[chan struct{}]struct{}
	}
}

// NewByKey returns a ByKey without waiters.
func NewByKey() *ByKey {
	w := &ByKey{}
	w.mu.byKey = map[int64]map[chan struct{}]struct{}{}
	return w
}

// Add registers a waiter on key; the channel is closed when key is woken. Call the
// returned function to unregister.
func (w *ByKey) Add(key int64) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.mu.byKey[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.mu.byKey[key] = set
	}
	set[ch] = struct{}{}
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if set, ok := w.mu.byKey[key]; ok {
			delete(set, ch)
			if len(set) == 0 {
				delete(w.mu.byKey, key)
			}
		}
	}
}

// Wake closes the channels of key's waiters.
func (w *ByKey) Wake(key int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.mu.byKey[key] {
		close(ch)
	}
	delete(w.mu.byKey, key)
}

// WakeAll closes every waiter's channel.
func (w *ByKey) WakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range w.mu.byKey {
		for ch := range set {
			close(ch)
		}
	}
	w.mu.byKey = map[int64]map[chan struct{}]struct{}{}
}
