package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/valuerates"
	"opsq/queuer/startstop"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// What the dashboard shows of the work being done (DESIGN.md §9), kept in PostgreSQL so
// that every instance shows the same and a restart loses nothing
// (migrations/00008_activity.sql):
//
//   - completions and failed attempts per minute over the last 24 h: each instance reads
//     its own counters (the outcome recorder's, counted in memory) every ActivityInterval
//     and adds what they grew by to the minute's row, one upsert, only when they grew;
//   - who is working: each instance writes its top TopConsumers consumer names, with their
//     chunks in flight here, their oldest lease and when they last asked for work, as one
//     small row of its own;
//   - each value's recent rate: in the same row and the same write, the instance's top
//     valuerates.Shown values of the keys the strategies limit, by chunks handed out over
//     the last minute (queuer/internal/valuerates counts them in memory).
//
// Neither is written by a completion, a fail or a renewal: the hot path pays a counter it
// already had, and the claims loop nothing.

const (
	// ActivityInterval is how often an instance writes its activity.
	ActivityInterval = 10 * time.Second
	// TopConsumers bounds the consumer names an instance writes, and the dashboard shows.
	TopConsumers = 50
	// SeenFor is how long a consumer name that asked for work and holds nothing is still
	// shown, with when it was last seen.
	SeenFor = time.Hour
	// seenMax bounds the consumer names an instance remembers having seen.
	seenMax = 4096
	// activityFresh is how old a summary may be and still be shown: an instance that
	// stopped writing has stopped, and its reservations with it.
	activityFresh = 3 * ActivityInterval
)

// Seen remembers when each consumer name last asked this instance for work: at most
// seenMax names, each forgotten SeenFor after it was last seen (a name new while it is
// full is not remembered until one is forgotten; it still shows while it holds chunks).
// Safe for concurrent use; Note costs one map write under a mutex.
type Seen struct {
	mu struct {
		sync.Mutex
		at    map[string]time.Time
		swept time.Time
	}
}

// NewSeen returns an empty Seen.
func NewSeen() *Seen {
	s := &Seen{}
	s.mu.at = map[string]time.Time{}
	return s
}

// Note records that consumer asked for work at now.
func (s *Seen) Note(consumer string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.at[consumer]; !ok && len(s.mu.at) >= seenMax {
		if now.Sub(s.mu.swept) < time.Minute {
			return // full, and swept a moment ago
		}
		s.sweepLocked(now)
		if len(s.mu.at) >= seenMax {
			return
		}
	}
	s.mu.at[consumer] = now
}

func (s *Seen) sweepLocked(now time.Time) {
	s.mu.swept = now
	for name, at := range s.mu.at {
		if now.Sub(at) > SeenFor {
			delete(s.mu.at, name)
		}
	}
}

// snapshot returns the names seen in the last SeenFor, and forgets the others.
func (s *Seen) snapshot(now time.Time) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(now)
	out := make(map[string]time.Time, len(s.mu.at))
	for name, at := range s.mu.at {
		out[name] = at
	}
	return out
}

// consumerEntry is one consumer name in an instance's summary, as written to the database:
// ages in milliseconds as of the write, so that the instances' clocks never meet.
type consumerEntry struct {
	Consumer       string `json:"c"`
	Inflight       int    `json:"n"`
	OldestLeaseAge *int64 `json:"o,omitempty"` // nil with nothing in flight
	LastSeenAge    int64  `json:"s"`
}

// topConsumers merges what the reserver holds with the names seen, and keeps the top n:
// most chunks in flight first, then most recently seen, then by name.
func topConsumers(loads []reserver.ConsumerLoad, seen map[string]time.Time, now time.Time, n int) []consumerEntry {
	byName := make(map[string]*consumerEntry, len(loads)+len(seen))
	for name, at := range seen {
		byName[name] = &consumerEntry{Consumer: name, LastSeenAge: now.Sub(at).Milliseconds()}
	}
	for _, l := range loads {
		e := byName[l.Consumer]
		if e == nil {
			e = &consumerEntry{Consumer: l.Consumer, LastSeenAge: now.Sub(l.NewestReservedAt).Milliseconds()}
			byName[l.Consumer] = e
		}
		e.Inflight = l.Inflight
		e.LastSeenAge = min(e.LastSeenAge, now.Sub(l.NewestReservedAt).Milliseconds())
		age := now.Sub(l.OldestReservedAt).Milliseconds()
		e.OldestLeaseAge = &age
	}
	out := make([]consumerEntry, 0, len(byName))
	for _, e := range byName {
		e.LastSeenAge = max(e.LastSeenAge, 0)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b consumerEntry) int {
		return cmp.Or(cmp.Compare(b.Inflight, a.Inflight), cmp.Compare(a.LastSeenAge, b.LastSeenAge), cmp.Compare(a.Consumer, b.Consumer))
	})
	return out[:min(len(out), n)]
}

// ActivityConfig configures an ActivityWriter.
type ActivityConfig struct {
	Pool     *pgxpool.Pool
	Instance string
	Log      *slog.Logger
	Now      func() time.Time // the clock of the reservations and of Seen
	// Counts returns the instance's completions and failed attempts so far (counters
	// that only grow).
	Counts func() (completed, failed int64)
	// Consumers returns what each consumer name holds here (reserver.Consumers).
	Consumers func() []reserver.ConsumerLoad
	Seen      *Seen
	// ValueRates counts the chunks handed out here per value of the keys limited; nil:
	// none are written.
	ValueRates *valuerates.Counter
}

// rateEntry is one value in an instance's top values' rates, as written to the database.
type rateEntry struct {
	Key   string  `json:"k"`
	Value string  `json:"v"` // canonical JSON text
	Count int64   `json:"n"` // chunks handed out over the window
	PerS  float64 `json:"r"` // the same per second
}

// topRates is what c counts, as written.
func topRates(c *valuerates.Counter) []rateEntry {
	out := []rateEntry{}
	if c == nil {
		return out
	}
	for _, r := range c.Top(valuerates.Shown) {
		out = append(out, rateEntry{Key: r.Key, Value: r.Value, Count: r.Count, PerS: r.PerS})
	}
	return out
}

// ActivityWriter writes the instance's activity every ActivityInterval, and once more at
// Stop (its counts since the last write, and an empty list of consumers: the instance
// holds nothing any more). Its goroutine lives from Start until Stop.
type ActivityWriter struct {
	startstop.Loop
	cfg ActivityConfig
	// written are the counts last added to the database; wroteEmpty, that the last list
	// of consumers written was empty. A write holds mu.
	mu         sync.Mutex
	written    [2]int64
	wroteEmpty bool
}

// NewActivityWriter returns the writer of an instance's activity; Start it.
func NewActivityWriter(cfg ActivityConfig) *ActivityWriter {
	return &ActivityWriter{cfg: cfg}
}

// Start starts the loop, counting from the counts of now.
func (w *ActivityWriter) Start(ctx context.Context) error {
	w.written[0], w.written[1] = w.cfg.Counts()
	w.Go(ctx, func(ctx context.Context) {
		tick := time.NewTicker(ActivityInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				// The last write, on a context of its own: the loop's has ended.
				last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				w.write(last, true)
				cancel()
				return
			case <-tick.C:
				w.write(ctx, false)
			}
		}
	})
	return nil
}

// Write writes the activity now, as the loop does every ActivityInterval.
func (w *ActivityWriter) Write(ctx context.Context) { w.write(ctx, false) }

// write adds the counts and replaces the list of consumers; stopping writes an empty one.
func (w *ActivityWriter) write(ctx context.Context, stopping bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	db := opsqsql.New(w.cfg.Pool)
	completed, failed := w.cfg.Counts()
	if d := [2]int64{completed - w.written[0], failed - w.written[1]}; d[0] > 0 || d[1] > 0 {
		if err := db.ActivityAdd(ctx, opsqsql.ActivityAddParams{Completed: d[0], Failed: d[1]}); err != nil {
			w.cfg.Log.WarnContext(ctx, "writing the completions per minute; adding them at the next write", slog.Any("error", err))
		} else {
			w.written = [2]int64{completed, failed}
		}
	}
	top, rates := []consumerEntry{}, []rateEntry{}
	if !stopping {
		now := w.cfg.Now()
		top = topConsumers(w.cfg.Consumers(), w.cfg.Seen.snapshot(now), now, TopConsumers)
		rates = topRates(w.cfg.ValueRates)
	}
	empty := len(top) == 0 && len(rates) == 0
	if empty && w.wroteEmpty {
		return // nothing new to say: the row says nothing already, or has gone stale
	}
	b, _ := json.Marshal(top)
	r, _ := json.Marshal(rates)
	if err := db.ConsumerActivityWrite(ctx, opsqsql.ConsumerActivityWriteParams{Instance: w.cfg.Instance, Consumers: b, ValueRates: r}); err != nil {
		w.cfg.Log.WarnContext(ctx, "writing who is working", slog.Any("error", err))
		return
	}
	w.wroteEmpty = empty
}

// Minute is one minute's completions and failed attempts, cluster-wide.
type Minute struct {
	At                time.Time // the minute's start
	Completed, Failed int64
}

// Minutes returns the minutes of the last 24 h in which anything was counted, oldest
// first, and the database's clock.
func (a *Admin) Minutes(ctx context.Context) ([]Minute, time.Time, error) {
	rows, err := opsqsql.New(a.pool).ActivityMinutes(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make([]Minute, len(rows))
	var now time.Time
	for i, r := range rows {
		out[i], now = Minute{At: r.Minute, Completed: r.Completed, Failed: r.Failed}, r.Now
	}
	if now.IsZero() {
		now = time.Now()
	}
	return out, now, nil
}

// Consumer is what one consumer name holds across the cluster, as the instances last wrote.
type Consumer struct {
	Name           string
	Inflight       int
	OldestLeaseAge *time.Duration // nil with nothing in flight
	LastSeenAge    time.Duration
	Instances      int // the instances that hold some of its chunks, or saw it
}

// Consumers returns who is working: the top TopConsumers names across the instances'
// fresh summaries, by chunks in flight, then by who was seen last. Each instance's list
// is its own top, so a name that is in no instance's top is missing here too.
func (a *Admin) Consumers(ctx context.Context) ([]Consumer, error) {
	rows, err := opsqsql.New(a.pool).ConsumerActivity(ctx, opsqsql.ConsumerActivityParams{Fresh: activityFresh})
	if err != nil {
		return nil, err
	}
	byName := map[string]*Consumer{}
	for _, r := range rows {
		var entries []consumerEntry
		if json.Unmarshal(r.Consumers, &entries) != nil {
			continue // not written by this version: its instance will write it again
		}
		since := r.Now.Sub(r.WrittenAt) // how old the ages written are
		for _, e := range entries {
			c := byName[e.Consumer]
			if c == nil {
				c = &Consumer{Name: e.Consumer, LastSeenAge: time.Duration(1<<63 - 1)}
				byName[e.Consumer] = c
			}
			c.Instances++
			c.Inflight += e.Inflight
			c.LastSeenAge = min(c.LastSeenAge, since+time.Duration(e.LastSeenAge)*time.Millisecond)
			if e.OldestLeaseAge != nil {
				age := since + time.Duration(*e.OldestLeaseAge)*time.Millisecond
				if c.OldestLeaseAge == nil || age > *c.OldestLeaseAge {
					c.OldestLeaseAge = &age
				}
			}
		}
	}
	out := make([]Consumer, 0, len(byName))
	for _, c := range byName {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Consumer) int {
		return cmp.Or(cmp.Compare(b.Inflight, a.Inflight), cmp.Compare(a.LastSeenAge, b.LastSeenAge), cmp.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), TopConsumers)], nil
}

// ValueRate is one value's recent rate across the cluster: the chunks handed out per
// second over the last minute, summed over the instances' last writes.
type ValueRate struct {
	Key   string
	Value string // canonical JSON text
	PerS  float64
	// Count is the chunks handed out over the instances' windows (about a minute each).
	Count int64
}

// ValueRates returns the top valuerates.Shown values of the keys the strategies limit,
// by chunks handed out per second over the last minute, cluster-wide, from the
// instances' fresh summaries. Each instance's list is its own top, so a value that is in
// no instance's top is missing here too, and a value's rate counts only the instances
// whose top it is in.
func (a *Admin) ValueRates(ctx context.Context) ([]ValueRate, error) {
	rows, err := opsqsql.New(a.pool).ValueRates(ctx, opsqsql.ValueRatesParams{Fresh: activityFresh})
	if err != nil {
		return nil, err
	}
	type pair struct{ key, value string }
	byValue := map[pair]*ValueRate{}
	for _, r := range rows {
		var entries []rateEntry
		if json.Unmarshal(r.ValueRates, &entries) != nil {
			continue // not written by this version: its instance will write it again
		}
		for _, e := range entries {
			p := pair{e.Key, e.Value}
			v := byValue[p]
			if v == nil {
				v = &ValueRate{Key: e.Key, Value: e.Value}
				byValue[p] = v
			}
			v.PerS += e.PerS
			v.Count += e.Count
		}
	}
	out := make([]ValueRate, 0, len(byValue))
	for _, v := range byValue {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b ValueRate) int {
		return cmp.Or(cmp.Compare(b.PerS, a.PerS), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value))
	})
	return out[:min(len(out), valuerates.Shown)], nil
}
