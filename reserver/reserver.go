// Package reserver holds the in-memory reservations of one opsq instance.
//
// A reservation is a lease on one chunk, held by the instance that owns the
// chunk's shard, for a consumer, until an expiry time. The reserver makes sure
// a chunk is reserved at most once on this instance, keeps the leases ordered
// by expiry, and keeps in-flight counts per shard and per strategic-metadata
// value in step with the live reservations.
//
// The package does no I/O: reservations are never written to the database,
// and nothing here talks to PostgreSQL, starts goroutines or reads the clock.
// The queuer decides what to reserve, records completions and failures
// (including expired leases, which count as a failed attempt) in the
// database, and runs the expiry loop, which polls [Reserver.TakeExpired].
package reserver

import (
	"container/heap"
	"sync"
	"time"
)

// Key identifies a chunk.
type Key struct {
	SubmissionID int64
	ChunkIndex   int32
}

// Reservation is one lease on one chunk.
type Reservation struct {
	// Token is the opaque, unique handle of the lease, made by the caller.
	Token string
	// Key is the reserved chunk.
	Key Key
	// Shard is the chunk's shard.
	Shard int
	// Generation is the fencing generation of the shard's claim when the
	// chunk was reserved.
	Generation int64
	// Retries is the chunk's attempt when it was reserved, as its token names it
	// (tokens.Token.Retries).
	Retries int32
	// Row is where the chunk's row was when it was read for this reservation (its
	// PostgreSQL address, sql.RowAddr; 0: not known): the completer of this instance
	// deletes the row by it. A hint, checked against Key there; the reserver only keeps it.
	Row uint64
	// Consumer names the consumer holding the lease.
	Consumer string
	// ReservedAt is when the chunk was reserved (the caller's clock), for the age of a
	// consumer's oldest lease (Consumers).
	ReservedAt time.Time
	// ExpiresAt is when the lease runs out. Compare it only with times from
	// the same clock (time.Now, so that the monotonic reading is used).
	ExpiresAt time.Time
	// Values are the strategic metadata of the chunk's submission, key ->
	// canonical value text (the JSON encoding: `42` or `"preview"`), used for
	// the in-flight counts per value.
	//
	// The reserver keeps the map it is given instead of copying it, so that
	// the reservations of one submission can share one map: the caller must
	// not modify it after Reserve, and must treat the Values of every
	// returned Reservation as read-only.
	Values map[string]string
	// Pairs, if not nil, is Values prepared with NewPairs (the two must agree), shared by
	// the reservations of one submission; when nil, Reserve prepares it from Values
	// before it takes its lock.
	Pairs *Pairs
}

// Config configures a Reserver. The zero value is ready to use.
type Config struct {
	// InitialCapacity is how many reservations to make room for up front,
	// which saves rehashing while an instance warms up. Defaults to 0 (grow as
	// needed).
	InitialCapacity int
}

// Reserver holds the live reservations of one instance.
//
// It is safe for concurrent use; every method holds one mutex for a short,
// bounded time. It starts no goroutines and so has no Start or Stop: the
// queuer's expiry loop calls [Reserver.TakeExpired] every tick, and calls
// Release once it has recorded each expiry.
//
// Costs, with n live reservations: Reserve, Release, ReleaseKey and Extend are
// O(log n); Get, IsReserved, the in-flight counts and Len are O(1); DropShard is
// O(m log n) for the shard's m reservations; TakeExpired is O(k log n) for the
// k reservations it returns; DropSubmission is O(n).
type Reserver struct {
	mu struct {
		sync.Mutex
		byToken map[string]*entry
		byKey   map[Key]*entry
		// byShard links the reservations of each shard that has any.
		byShard map[int]*entryList
		// byValue counts live reservations per strategic-metadata pair;
		// pairs whose count reaches 0 are deleted.
		byValue map[valuePair]int
		// byConsumer links the reservations of each consumer name that has any, in
		// reservation order: its head is the consumer's oldest lease.
		byConsumer map[string]*entryList
		expiry     expiryHeap
		// seq numbers reservations in the order they were made, to break
		// ties between equal expiry times.
		seq uint64
	}
}

// entry is the reserver's record of one live reservation.
type entry struct {
	res Reservation
	// index is the entry's position in the expiry heap.
	index int
	// expired is set by TakeExpired: the lease ran out, and only Release ends it.
	expired bool
	// links link the entries of one shard, and of one consumer name, in reservation order
	// (entryList).
	links [listKinds]links
}

// valuePair is one strategic-metadata key and canonical value.
type valuePair struct {
	key, value string
}

// New returns an empty Reserver. A negative InitialCapacity is treated as 0.
func New(cfg Config) *Reserver {
	n := max(cfg.InitialCapacity, 0)
	r := &Reserver{}
	r.mu.byToken = make(map[string]*entry, n)
	r.mu.byKey = make(map[Key]*entry, n)
	r.mu.byShard = make(map[int]*entryList)
	r.mu.byValue = make(map[valuePair]int)
	r.mu.byConsumer = make(map[string]*entryList)
	r.mu.expiry = make(expiryHeap, 0, n)
	return r
}

// Reserve records res and reports whether it did. It returns false, and
// changes nothing, when res.Key is already reserved or res.Token is already
// in use. Reserve keeps res.Values without copying it (see
// [Reservation.Values]). Under its lock it does no work per metadata key beyond one count
// per pair of res.Pairs, prepared outside the lock.
func (r *Reserver) Reserve(res Reservation) bool {
	if res.Pairs == nil && len(res.Values) > 0 {
		res.Pairs = NewPairs(res.Values)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.mu.byKey[res.Key]; ok {
		return false
	}
	if _, ok := r.mu.byToken[res.Token]; ok {
		return false
	}
	r.mu.seq++
	e := &entry{res: res}
	r.mu.byToken[res.Token] = e
	r.mu.byKey[res.Key] = e
	r.mu.expiry.push(expiryItem{expiresAt: res.ExpiresAt, seq: r.mu.seq, e: e})
	l := r.mu.byShard[res.Shard]
	if l == nil {
		l = &entryList{kind: shardLinks}
		r.mu.byShard[res.Shard] = l
	}
	l.pushBack(e)
	cl := r.mu.byConsumer[res.Consumer]
	if cl == nil {
		cl = &entryList{kind: consumerLinks}
		r.mu.byConsumer[res.Consumer] = cl
	}
	cl.pushBack(e)
	if res.Pairs != nil {
		for _, p := range res.Pairs.list {
			r.mu.byValue[p]++
		}
	}
	return true
}

// IsReserved reports whether the chunk k is reserved.
func (r *Reserver) IsReserved(k Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.mu.byKey[k]
	return ok
}

// Get returns the live reservation with the given token.
func (r *Reserver) Get(token string) (Reservation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.mu.byToken[token]
	if !ok {
		return Reservation{}, false
	}
	return e.res, true
}

// Release removes and returns the reservation with the given token, as when
// its consumer completes or fails the chunk. It returns false if there is no
// such reservation (unknown token, or already released or expired).
func (r *Reserver) Release(token string) (Reservation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.mu.byToken[token]
	if !ok {
		return Reservation{}, false
	}
	r.removeLocked(e)
	return e.res, true
}

// ReleaseKey removes and returns the reservation of chunk k, as when another
// instance reports (by NOTIFY) that it completed the chunk. It returns false
// if k is not reserved.
func (r *Reserver) ReleaseKey(k Key) (Reservation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.mu.byKey[k]
	if !ok {
		return Reservation{}, false
	}
	r.removeLocked(e)
	return e.res, true
}

// Extend sets the expiry of the reservation with the given token to
// expiresAt, which may be earlier or later than before, and returns the
// updated reservation. It returns false if there is no such reservation, or if its lease
// ran out (TakeExpired returned it).
func (r *Reserver) Extend(token string, expiresAt time.Time) (Reservation, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.mu.byToken[token]
	if !ok || e.expired {
		return Reservation{}, false // an expired lease cannot be extended, even while held
	}
	e.res.ExpiresAt = expiresAt
	r.mu.expiry[e.index].expiresAt = expiresAt
	heap.Fix(&r.mu.expiry, e.index)
	return e.res, true
}

// DropShard removes and returns all reservations of the shard, in the order
// they were made, as when the shard is lost or released. It returns nil if
// the shard has none.
func (r *Reserver) DropShard(shard int) []Reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.mu.byShard[shard]
	if l == nil {
		return nil
	}
	out := make([]Reservation, 0, l.n)
	for l.head != nil {
		e := l.head
		out = append(out, e.res)
		r.removeLocked(e) // unlinks e; deletes l from byShard with the last one
	}
	return out
}

// ShardReservations returns the reservations of the shard, in the order they were
// made, leaving them held: what an owner that gives the shard up records as abandoned
// before it releases it. It returns nil if the shard has none.
func (r *Reserver) ShardReservations(shard int) []Reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.mu.byShard[shard]
	if l == nil {
		return nil
	}
	out := make([]Reservation, 0, l.n)
	for e := l.head; e != nil; e = e.links[shardLinks].next {
		out = append(out, e.res)
	}
	return out
}

// InflightShard returns the number of live reservations on the shard.
func (r *Reserver) InflightShard(shard int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.mu.byShard[shard]; l != nil {
		return l.n
	}
	return 0
}

// InflightValue returns the number of live reservations whose Values[key] is
// value (canonical value text, as in [Reservation.Values]).
func (r *Reserver) InflightValue(key, value string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.byValue[valuePair{key, value}]
}

// ConsumerLoad is what one consumer name holds on this instance.
type ConsumerLoad struct {
	Consumer string // "" for reserves that named no consumer
	Inflight int
	// OldestReservedAt and NewestReservedAt are the ReservedAt of its oldest and newest
	// live reservations.
	OldestReservedAt, NewestReservedAt time.Time
}

// Consumers returns what each consumer name holds, in no order: one entry per name with
// live reservations, in O(c) for c names (never a walk over the reservations).
func (r *Reserver) Consumers() []ConsumerLoad {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ConsumerLoad, 0, len(r.mu.byConsumer))
	for name, l := range r.mu.byConsumer {
		out = append(out, ConsumerLoad{Consumer: name, Inflight: l.n,
			OldestReservedAt: l.head.res.ReservedAt, NewestReservedAt: l.tail.res.ReservedAt})
	}
	return out
}

// Len returns the number of live reservations.
func (r *Reserver) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.byToken)
}

// removeLocked removes e from every index and count. r.mu must be held.
func (r *Reserver) removeLocked(e *entry) {
	delete(r.mu.byToken, e.res.Token)
	delete(r.mu.byKey, e.res.Key)
	heap.Remove(&r.mu.expiry, e.index)
	l := r.mu.byShard[e.res.Shard]
	l.remove(e)
	if l.n == 0 {
		delete(r.mu.byShard, e.res.Shard)
	}
	cl := r.mu.byConsumer[e.res.Consumer]
	cl.remove(e)
	if cl.n == 0 {
		delete(r.mu.byConsumer, e.res.Consumer)
	}
	if e.res.Pairs == nil {
		return
	}
	for _, p := range e.res.Pairs.list {
		if n := r.mu.byValue[p] - 1; n > 0 {
			r.mu.byValue[p] = n
		} else {
			delete(r.mu.byValue, p)
		}
	}
}

// TakeExpired returns every reservation whose lease ran out by now, and keeps holding
// their chunks (so that nobody reserves them) until the caller has recorded the expiry
// and calls Release: their expiry moves to retryAt, when a later call returns them again
// if they are still held (the recording failed). The returned reservations carry the
// expiry that ran out.
func (r *Reserver) TakeExpired(now, retryAt time.Time) []Reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Reservation
	for len(r.mu.expiry) > 0 {
		it := r.mu.expiry[0]
		if it.expiresAt.After(now) {
			break
		}
		e := it.e
		out = append(out, e.res)
		e.expired = true
		e.res.ExpiresAt = retryAt
		r.mu.expiry[e.index].expiresAt = retryAt
		heap.Fix(&r.mu.expiry, e.index)
	}
	return out
}
