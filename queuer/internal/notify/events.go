// Package notify is how the parts of an instance's engine hear what changed, wherever it
// changed: one event protocol. Each change is raised once, as a typed Event, on the
// instance's Bus, which hands it to every part (each a Handler) in the order they were
// subscribed: the reserve path (reservations, tombstones, buffers, resume hints, the
// submission-info cache), the router (where work is), the submissions' waiters, the
// keyring, the queue of waiting reserves. A change made on this instance is raised where
// it is made; a change made on another instance comes as a NOTIFY, which the Listener
// reads (one LISTEN connection, shared with the API keys) and raises as the same event.
// A part that caches something about chunks handles every event that can change it, so a
// new cache cannot forget one.
//
// The channels, the grammar of their payloads and their senders are in payload.go. It
// does not decide what a part does with an event, and holds no state but the handlers.
package notify

import "opsq/reserver"

// Event is one change. The events are the types below.
type Event interface{ event() }

// NewWork: chunks became reservable. Shards names the shard of each (a shard named twice:
// two chunks); nil means spread over every shard. Chunks is how many, -1 for any number.
// Local marks one raised by the instance that inserted them, ahead of its own NOTIFY: the
// caches that must see the new chunks at once act on it, and the wake-ups wait for the
// NOTIFY, which every instance gets.
type NewWork struct {
	Shards []int
	Chunks int
	Local  bool
}

// ChunksFreed: chunks reservable again, their reservations over — an attempt retried
// (here, or elsewhere: then Shard is the reservation holder's to drop), a lease that
// expired, chunks a reserve took and gave back.
type ChunksFreed struct{ Chunks []Freed }

// Freed is one chunk of ChunksFreed: its key and shard, the token of the reservation that
// ended, and Retries, the retries count of the attempt that was retried (the rows of the
// chunk read with that count or a lower one are stale), or NotRetried.
type Freed struct {
	Key     reserver.Key
	Shard   int
	Retries int32
	Token   string
}

// NotRetried is Freed.Retries of a chunk given back unchanged (no attempt counted).
const NotRetried int32 = -1

// ChunksFinished: chunks completed or failed; every row of them is stale.
type ChunksFinished struct{ Keys []reserver.Key }

// SubmissionDropped: a submission failed or was cancelled; its chunks are gone.
type SubmissionDropped struct{ ID int64 }

// SubmissionFinished: a submission reached a final state.
type SubmissionFinished struct{ ID int64 }

// SubmissionProgress: chunks of these submissions were finished (completed, failed for
// good, or skipped); their results may be read further.
type SubmissionProgress struct{ IDs []int64 }

// ParentsWaited: these submissions have a child waiting on them (or to re-arm after
// their retry): the children's part acts on them when they finish.
type ParentsWaited struct{ IDs []int64 }

// SubmissionPaused: a submission was paused; its chunks left opsq.chunks (they wait in
// opsq.chunks_waiting until resumed), so candidates of it read before are stale. Its
// reservations in flight stay: they finish as usual.
type SubmissionPaused struct{ ID int64 }

// ShardsChanged: this instance lost or acquired shards.
type ShardsChanged struct{ Lost, Acquired []int }

// Resync: notifications may have been missed (the listener reconnected): anything may
// have changed.
type Resync struct{}

// ClusterKeysChanged: the cluster keys were rotated.
type ClusterKeysChanged struct{}

// ThrottlesChanged: a throttle was set (POST /v1/throttle); the throttles in force are to
// be read again, and then, when Nonce is set, the setter told so (SendThrottleAck).
type ThrottlesChanged struct{ Nonce string }

// ThrottleAck: Instance has in force the throttle set with Nonce.
type ThrottleAck struct{ Nonce, Instance string }

func (NewWork) event()            {}
func (ChunksFreed) event()        {}
func (ChunksFinished) event()     {}
func (SubmissionDropped) event()  {}
func (SubmissionFinished) event() {}
func (SubmissionProgress) event() {}
func (SubmissionPaused) event()   {}
func (ShardsChanged) event()      {}
func (Resync) event()             {}
func (ClusterKeysChanged) event() {}
func (ThrottlesChanged) event()   {}
func (ThrottleAck) event()        {}
func (ParentsWaited) event()      {}

// Handler is a part that hears the events. Handle runs on the goroutine that raised the
// event (a request, the listener, the claims loop): it must not block, and updates memory
// only (no I/O).
type Handler interface {
	Handle(Event)
}

// HandlerFunc is a function as a Handler.
type HandlerFunc func(Event)

// Handle calls f.
func (f HandlerFunc) Handle(e Event) { f(e) }

// Bus hands each event raised to every handler, in the order they were subscribed.
// Subscribe before the first Raise; Raise is safe for concurrent use (as safe as the
// handlers are).
type Bus struct {
	handlers []Handler
}

// Subscribe adds handlers.
func (b *Bus) Subscribe(hs ...Handler) { b.handlers = append(b.handlers, hs...) }

// Raise hands e to every handler.
func (b *Bus) Raise(e Event) {
	for _, h := range b.handlers {
		h.Handle(e)
	}
}
