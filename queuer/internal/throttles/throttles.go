// Package throttles is consumers' back-pressure (DESIGN.md §3, POST /v1/throttle): a
// throttle of a strategic value (or of a tenant, under the key "@tenant") keeps every
// chunk of the submissions with that value from being handed out, by any instance, until
// it ends. The throttles live in opsq.throttles; each instance caches those in force
// (reloaded on the NOTIFY of a new one, after a reconnection, and every ReloadInterval)
// and counts each down by its own monotonic clock from what the database said was left,
// so that clocks that disagree between hosts do not move a throttle's end.
//
// A throttle may be lifted before its end (Lift, DELETE /v1/throttle), by the same NOTIFY
// and acknowledgements as a throttle set. New throttles are bounded per tenant
// (MaxPerTenant) and per API key (MaxPerKey), so that every instance caches every
// throttle in force: one tenant's throttles can never push another's out.
//
// It does not decide which chunks a reserve reads: the reserve path asks Blocks of each
// candidate it would take. It raises no event but the new work of a throttle's end or
// lift (so that the reserves waiting for work look again).
package throttles

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/identity"
	"opsq/queuer/internal/notify"
	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// Limits of a throttle.
const (
	// ReloadInterval is how often an instance reads the throttles in force again, in case
	// it missed a NOTIFY.
	ReloadInterval = 5 * time.Second
	// MaxPerTenant bounds the throttles in force in one tenant (those of consumers confined
	// to it), and the throttles of every tenant (those of consumers that are not): a
	// throttle past it is refused (LimitError). With it, what an instance caches is
	// bounded by the tenants the operator named in consumer keys, and it caches all of it.
	MaxPerTenant = 1_000
	// MaxPerKey bounds the throttles in force that one API key set: half its tenant's, so
	// that one consumer's flood leaves room for the tenant's others.
	MaxPerKey = MaxPerTenant / 2
)

// ErrNotInForce is a lift of a throttle that is not in force (in the tenants given).
var ErrNotInForce = errors.New("no such throttle in force")

// LimitError is a throttle refused because it would take a tenant, or an API key, past
// its bound: Scope "tenant" (Name the tenant; "" for the throttles of every tenant) or
// "key" (Name the API key), Max the bound, FirstEnd how long until the first of the
// throttles counted there ends.
type LimitError struct {
	Scope    string
	Name     string
	Max      int
	FirstEnd time.Duration
}

func (e *LimitError) Error() string {
	var what string
	switch {
	case e.Scope == "key":
		what = fmt.Sprintf("the API key %q has %d throttles in force, the most one key may have (half of a tenant's %d)", e.Name, e.Max, MaxPerTenant)
	case e.Name == "":
		what = fmt.Sprintf("%d throttles of every tenant are in force, the most there may be", e.Max)
	default:
		what = fmt.Sprintf("the tenant %q has %d throttles in force, the most a tenant may have", e.Name, e.Max)
	}
	return fmt.Sprintf("%s; the first of them ends in %s, and DELETE /v1/throttle lifts one", what, e.FirstEnd.Round(time.Second))
}

// Throttle is one throttle in force: the strategic key and the value's canonical JSON
// text, the tenant it is confined to ("" for every tenant), and when it ends.
type Throttle struct {
	Key    string
	Value  string
	Tenant string
	Until  time.Time // by the database's clock, as it answers
	// SetBy is the name of the API key that set it ("" without keys), at SetAt (by the
	// database's clock); a throttle set again with a later end names the later setter.
	SetBy string
	SetAt time.Time
	ends  time.Time // by this instance's monotonic clock
}

// AckWaitDefault bounds how long setting a throttle waits for the other instances that
// hold shards to have it in force (Set), unless Config.AckWait says otherwise.
const AckWaitDefault = 2 * time.Second

// Config configures Throttles.
type Config struct {
	Pool opsqsql.Pool
	Log  *slog.Logger
	// Bus hears the new work of a throttle that ended.
	Bus *notify.Bus
	// Instance is this instance's id: it acknowledges the throttles other instances set
	// under it, and waits for the others' acknowledgements of its own.
	Instance string
	// AckWait bounds that wait; 0: AckWaitDefault.
	AckWait time.Duration
}

// Throttles is the instance's view of the throttles in force. It is safe for concurrent
// use; its goroutine (reloads, and the wake-up at each throttle's end) lives from Start
// until Stop.
type Throttles struct {
	cfg Config
	startstop.Loop
	wake chan struct{}
	// live is the throttles in force, by key then value; nil when there are none, so that
	// a reserve checks nothing at all then.
	live atomic.Pointer[snapshot]
	// loading orders the reads of the throttles (the loop's, a Set's, a Lift's): a read
	// that began before another's commit never replaces what a read after it stored.
	loading sync.Mutex

	mu struct {
		sync.Mutex
		// toAck is the nonces of throttles other instances set, to acknowledge once
		// loaded; at most ackMax (past it, those setters wait out their bound).
		toAck []string
		// waiting is this instance's Sets waiting for acknowledgements, by nonce: each
		// hears the instances that have its throttle in force.
		waiting map[string]chan string
	}
}

// ackMax bounds the acknowledgements an instance owes at once.
const ackMax = 1_000

// snapshot is the throttles in force as last read: read-only once published.
type snapshot struct {
	byKey map[string]map[string][]Throttle
	list  []Throttle
	keys  []string // the keys of byKey
}

var (
	_ startstop.Service = (*Throttles)(nil)
	_ notify.Handler    = (*Throttles)(nil)
)

// New returns the throttles of cfg; Start reads those in force.
func New(cfg Config) *Throttles {
	return &Throttles{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Start reads the throttles in force, then keeps them fresh until Stop.
func (t *Throttles) Start(ctx context.Context) error {
	if err := t.Load(ctx); err != nil {
		return err
	}
	t.Go(ctx, t.loop)
	return nil
}

func (t *Throttles) loop(ctx context.Context) {
	tick := time.NewTicker(ReloadInterval)
	defer tick.Stop()
	end := time.NewTimer(time.Hour)
	defer end.Stop()
	for {
		end.Reset(t.nextEnd())
		ended := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-t.wake:
		case <-end.C:
			ended = true
		}
		t.mu.Lock()
		acks := t.mu.toAck
		t.mu.toAck = nil
		t.mu.Unlock()
		lifted, err := t.load(ctx)
		if err != nil && ctx.Err() == nil {
			t.cfg.Log.Warn("reading the throttles in force; keeping those held", slog.Any("error", err))
		} else if err == nil {
			t.ack(ctx, acks)
		}
		if ended || lifted {
			// The chunks of the value are reservable again: the reserves waiting look again.
			t.raiseNewWork()
		}
	}
}

// nextEnd is how long until the next throttle held ends (an hour when none is).
func (t *Throttles) nextEnd() time.Duration {
	next := time.Hour
	if s := t.live.Load(); s != nil {
		now := time.Now()
		for _, th := range s.list {
			if d := th.ends.Sub(now); d < next {
				next = max(d, time.Millisecond)
			}
		}
	}
	return next
}

// Handle reads the throttles again soon after one was set, or after notifications may
// have been missed, and hands the acknowledgements of this instance's throttles to their
// Sets.
func (t *Throttles) Handle(e notify.Event) {
	switch e := e.(type) {
	case notify.ThrottlesChanged:
		if e.Nonce != "" {
			t.mu.Lock()
			if _, own := t.mu.waiting[e.Nonce]; !own && len(t.mu.toAck) < ackMax {
				t.mu.toAck = append(t.mu.toAck, e.Nonce)
			}
			t.mu.Unlock()
		}
		t.reload()
	case notify.Resync:
		t.reload()
	case notify.ThrottleAck:
		t.mu.Lock()
		ch := t.mu.waiting[e.Nonce]
		t.mu.Unlock()
		if ch != nil {
			select {
			case ch <- e.Instance:
			default: // more acknowledgements than instances: the Set has what it needs
			}
		}
	}
}

// raiseNewWork wakes the reserves waiting for work: a throttle ended or was lifted.
func (t *Throttles) raiseNewWork() {
	if t.cfg.Bus != nil {
		t.cfg.Bus.Raise(notify.NewWork{Chunks: -1})
	}
}

// reload has the loop read the throttles again soon.
func (t *Throttles) reload() {
	select {
	case t.wake <- struct{}{}:
	default: // a reload is pending already
	}
}

// ack tells the setters of nonces that this instance has their throttles in force.
func (t *Throttles) ack(ctx context.Context, nonces []string) {
	for _, n := range nonces {
		if err := notify.SendThrottleAck(ctx, opsqsql.New(t.cfg.Pool), n, t.cfg.Instance); err != nil && ctx.Err() == nil {
			t.cfg.Log.Warn("acknowledging a throttle; its setter waits out its bound", slog.Any("error", err))
			return
		}
	}
}

// Load reads the throttles in force.
func (t *Throttles) Load(ctx context.Context) error {
	_, err := t.load(ctx)
	return err
}

// load reads the throttles in force, all of them (the bounds keep them few), and reports
// whether one held before and not ended by this instance's clock is gone: lifted.
func (t *Throttles) load(ctx context.Context) (lifted bool, err error) {
	t.loading.Lock()
	defer t.loading.Unlock()
	rows, err := opsqsql.New(t.cfg.Pool).ThrottlesLoad(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the throttles: %w", err)
	}
	var s *snapshot
	if len(rows) > 0 {
		now := time.Now()
		s = &snapshot{byKey: map[string]map[string][]Throttle{}, list: make([]Throttle, len(rows))}
		for i, r := range rows {
			th := Throttle{Key: r.Key, Value: r.Value, Tenant: r.Tenant, Until: r.Until, SetBy: r.SetBy, SetAt: r.SetAt,
				ends: now.Add(time.Duration(r.LeftMicros) * time.Microsecond)}
			s.list[i] = th
			if s.byKey[r.Key] == nil {
				s.byKey[r.Key] = map[string][]Throttle{}
			}
			s.byKey[r.Key][r.Value] = append(s.byKey[r.Key][r.Value], th)
		}
		for key := range s.byKey {
			s.keys = append(s.keys, key)
		}
	}
	old := t.live.Swap(s)
	return old != nil && s.lacksAny(old.list), nil
}

// lacksAny reports whether one of held, not ended by this instance's clock, is not in s
// (nil: none is).
func (s *snapshot) lacksAny(held []Throttle) bool {
	now := time.Now()
	for _, th := range held {
		if !now.Before(th.ends) {
			continue
		}
		if s == nil || !slices.ContainsFunc(s.byKey[th.Key][th.Value], func(o Throttle) bool { return o.Tenant == th.Tenant }) {
			return true
		}
	}
	return false
}

// Blocks reports whether a throttle in force keeps back the chunks of a submission with
// strategic values (key -> canonical JSON text, "@tenant" included) of tenant. It reads
// nothing and takes no lock; with no throttle in force it is one atomic load.
func (t *Throttles) Blocks(values map[string]string, tenant string) bool {
	s := t.live.Load()
	if s == nil {
		return false
	}
	var now time.Time
	for key, byValue := range s.byKey {
		v, ok := values[key]
		if !ok {
			continue
		}
		for _, th := range byValue[v] {
			if th.Tenant != "" && th.Tenant != tenant {
				continue
			}
			if now.IsZero() {
				now = time.Now()
			}
			if now.Before(th.ends) {
				return true
			}
		}
	}
	return false
}

// Keys returns the keys of the throttles held (some may have ended since the last
// reload): read-only. With no throttle held it is one atomic load, and nil.
func (t *Throttles) Keys() []string {
	if s := t.live.Load(); s != nil {
		return s.keys
	}
	return nil
}

// InForce returns the throttles in force, those that end last first.
func (t *Throttles) InForce() []Throttle {
	s := t.live.Load()
	if s == nil {
		return nil
	}
	now := time.Now()
	var out []Throttle
	for _, th := range s.list {
		if now.Before(th.ends) {
			out = append(out, th)
		}
	}
	return out
}

// Set throttles key = value (canonical JSON text) for d, in each of tenants (nil: every
// tenant), and announces it to every instance; this instance applies it before Set
// returns. It returns when the throttle ends, by the database's clock. The caller checks
// d (at most an hour, DESIGN.md §3) and the value. The API key of ctx's caller (package
// identity) is its setter; a throttle that would take a tenant past MaxPerTenant, or the
// key past MaxPerKey, is refused with a *LimitError.
func (t *Throttles) Set(ctx context.Context, key, value string, tenants []string, d time.Duration) (time.Time, error) {
	if tenants == nil {
		tenants = []string{""}
	}
	var by string
	if c, ok := identity.From(ctx); ok {
		by = c.Name
	}
	var until time.Time
	err := t.announce(ctx, func(q opsqsql.Queries) error {
		if err := q.ThrottleLock(ctx, boundLocks(tenants, by)); err != nil {
			return err
		}
		counts, err := q.ThrottleBounds(ctx, opsqsql.ThrottleBoundsParams{Key: key, Value: value, Tenants: tenants, SetBy: by})
		if err != nil {
			return err
		}
		for _, c := range counts {
			limit := MaxPerTenant
			if c.Scope == "key" {
				limit = MaxPerKey
			}
			if c.N >= int64(limit) {
				return &LimitError{Scope: c.Scope, Name: c.Name, Max: limit, FirstEnd: time.Duration(c.FirstEndMicros) * time.Microsecond}
			}
		}
		until, err = q.ThrottleSet(ctx, opsqsql.ThrottleSetParams{
			Key: key, Value: value, Tenants: tenants, ForMicros: d.Microseconds(), SetBy: by,
		})
		return err
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("setting a throttle of %s = %s: %w", key, value, err)
	}
	return until, nil
}

// Lift ends the throttles of key = value (canonical JSON text) at once: in each of tenants
// ("" names the throttle of every tenant), or all of them when tenants is nil. It returns
// how many were in force, once every other instance that may hand out chunks no longer
// holds them (as Set waits for a throttle's acknowledgements), or ErrNotInForce when none
// was.
func (t *Throttles) Lift(ctx context.Context, key, value string, tenants []string) (int, error) {
	var n int64
	err := t.announce(ctx, func(q opsqsql.Queries) error {
		var err error
		n, err = q.ThrottleLift(ctx, opsqsql.ThrottleLiftParams{Key: key, Value: value, Tenants: tenants, Every: tenants == nil})
		if err == nil && n == 0 {
			err = ErrNotInForce
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("lifting the throttle of %s = %s: %w", key, value, err)
	}
	// The lift is in force here (announce reloaded): the reserves waiting here look again;
	// the other instances' look again at their reload.
	t.raiseNewWork()
	return int(n), nil
}

// announce runs change in a transaction with the NOTIFY that has every instance read the
// throttles again, reads them here, and waits for the others' acknowledgements
// (awaitAcks): a change answered is in force wherever a chunk could be handed out.
func (t *Throttles) announce(ctx context.Context, change func(q opsqsql.Queries) error) error {
	// Listen for the acknowledgements before anyone can send one.
	var b [12]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	acks := make(chan string, 64)
	t.mu.Lock()
	if t.mu.waiting == nil {
		t.mu.waiting = map[string]chan string{}
	}
	t.mu.waiting[nonce] = acks
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.mu.waiting, nonce)
		t.mu.Unlock()
	}()
	err := opsqsql.InTx(ctx, t.cfg.Pool, func(q opsqsql.Queries) error {
		if err := change(q); err != nil {
			return err
		}
		// "set:<nonce>", a set or a lift alike: the instances read the throttles again.
		return notify.SendThrottles(ctx, q, nonce)
	})
	if err != nil {
		return err
	}
	if err := t.Load(ctx); err != nil {
		return err
	}
	t.reload() // the loop's timer: the next end may have changed
	t.awaitAcks(ctx, acks)
	return nil
}

// boundLocks are the advisory locks of the bounds a throttle of tenants set by the API key
// by is counted against, sorted (every setter takes them in the same order).
func boundLocks(tenants []string, by string) []int64 {
	lock := func(scope, name string) int64 {
		h := fnv.New64a()
		h.Write([]byte("opsq.throttles\x00" + scope + "\x00" + name))
		return int64(h.Sum64())
	}
	locks := make([]int64, 0, len(tenants)+1)
	for _, tenant := range tenants {
		locks = append(locks, lock("tenant", tenant))
	}
	if by != "" {
		locks = append(locks, lock("key", by))
	}
	slices.Sort(locks)
	return slices.Compact(locks)
}

// awaitAcks waits until every other instance that may hand out chunks has acknowledged
// the change (a throttle set or lifted) whose acknowledgements come on acks, at most Config.AckWait: a throttle answered
// is in force wherever a chunk of its value could be handed out. One that does not answer
// in time has it at its next reload (ReloadInterval), or its next NOTIFY; that is logged.
func (t *Throttles) awaitAcks(ctx context.Context, acks <-chan string) {
	owners, err := opsqsql.New(t.cfg.Pool).ThrottleOwners(ctx, t.cfg.Instance)
	if err != nil {
		t.cfg.Log.Warn("a throttle is set or lifted, but the instances that hold shards could not be read to wait for them", slog.Any("error", err))
		return
	}
	missing := map[string]bool{}
	for _, o := range owners {
		missing[o] = true
	}
	wait := cmp.Or(t.cfg.AckWait, AckWaitDefault)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(missing) > 0 {
		select {
		case id := <-acks:
			delete(missing, id)
		case <-timer.C:
			t.cfg.Log.Warn("a throttle is set or lifted; some instances did not confirm it in time and apply it at their next reload",
				slog.Any("instances", slices.Sorted(maps.Keys(missing))), slog.Duration("waited", wait))
			return
		case <-ctx.Done():
			return
		}
	}
}

// CollectSchedule is how often the throttles that ended are deleted.
const CollectSchedule = "@every 1m"

// Collect deletes the throttles that ended (a cron job).
func (t *Throttles) Collect(ctx context.Context) {
	if err := opsqsql.New(t.cfg.Pool).ThrottlesCollect(ctx); err != nil && ctx.Err() == nil {
		t.cfg.Log.Warn("deleting the throttles that ended", slog.Any("error", err))
	}
}
