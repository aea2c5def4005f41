package handout

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	opsqsql "opsq/sql"
)

// The rate_limit blocks (docs/rates.md): one token bucket per key, value, rate and burst
// in PostgreSQL (opsq.rate_buckets), of which each instance leases a few tokens at a time
// — a slice — so that a chunk costs a database round trip only once per slice. A lease is
// good for as long as the bucket takes to refill it; its unused tokens go back to the
// bucket with the next lease. The bucket holds burst − slice tokens at most, so that the
// chunks handed out in any window of t seconds, by all instances together, never exceed
// per_second × t + burst (the tokens of a lease are used within its validity, which is
// what the slice taken out of the capacity pays for).

// rateSliceTime is about how long a lease's tokens last at the full rate: a value served
// at per_second costs each instance one round trip per rateSliceTime.
const rateSliceTime = 100 * time.Millisecond

// rateLeaseMaxTime bounds a lease's validity, for the slowest rates.
const rateLeaseMaxTime = time.Second

// rateRule is a rate_limit's key, rate and burst.
type rateRule struct {
	key       string
	perSecond float64
	burst     int
}

// slice is how many tokens a lease takes: about rateSliceTime's worth at the full rate,
// at most half the burst, at least one.
func (ru rateRule) slice() int {
	n := math.Round(ru.perSecond * rateSliceTime.Seconds())
	return max(1, min(int(n), ru.burst/2))
}

// capacity is what the bucket holds at most: the burst less one slice (at least one).
func (ru rateRule) capacity() int { return max(1, ru.burst-ru.slice()) }

// validity is how long a lease's tokens may be used: the time the bucket takes to refill a
// slice, at most rateLeaseMaxTime.
func (ru rateRule) validity() time.Duration {
	d := time.Duration(float64(ru.slice()) / ru.perSecond * float64(time.Second))
	return min(d, rateLeaseMaxTime)
}

// bucketKey names one bucket: a rule and a value of its key (canonical JSON text).
type bucketKey struct {
	rule  rateRule
	value string
}

// rateLease is what this instance holds of one bucket.
type rateLease struct {
	tokens     int
	expires    time.Time // by the monotonic clock: tokens unused then go back
	emptyUntil time.Time // the bucket had no token: not asked again before then
	waking     bool      // a wake-up of the waiting reserves is due at emptyUntil
}

// ratesLeasesMax bounds the leases held; past it those that expired are forgotten.
const ratesLeasesMax = 10_000

// rates owns this instance's leases of rate_limit tokens. Safe for concurrent use; its
// only goroutines are the timers that wake waiting reserves when a bucket refills.
type rates struct {
	pool opsqsql.Pool
	log  *slog.Logger
	// wake wakes up to n waiting reserves: tokens of a bucket that had none are due.
	wake func(n int)
	mu   struct {
		sync.Mutex
		leases map[bucketKey]*rateLease
	}
}

func newRates(pool opsqsql.Pool, log *slog.Logger, wake func(int)) *rates {
	r := &rates{pool: pool, log: log, wake: wake}
	r.mu.leases = map[bucketKey]*rateLease{}
	return r
}

// take takes one token of every rate rule whose key the candidate's submission has; all or
// none. It returns the rule whose bucket had no token left (nil when every token was
// taken) and the buckets it took from, for giveBack.
func (rs *rates) take(ctx context.Context, values map[string]string, rules []rateRule) (*rateRule, []bucketKey, error) {
	var taken []bucketKey
	for i, ru := range rules {
		v, ok := values[ru.key]
		if !ok {
			continue // not limited by a key its submission lacks
		}
		bk := bucketKey{rule: ru, value: v}
		got, err := rs.takeOne(ctx, bk)
		if err != nil || !got {
			rs.giveBack(taken)
			if err != nil {
				return nil, nil, err
			}
			return &rules[i], nil, nil
		}
		taken = append(taken, bk)
	}
	return nil, taken, nil
}

// takeOne takes a token of bk: from the lease held, or from a new lease.
func (rs *rates) takeOne(ctx context.Context, bk bucketKey) (bool, error) {
	rs.mu.Lock()
	l := rs.mu.leases[bk]
	if l == nil {
		if len(rs.mu.leases) >= ratesLeasesMax {
			rs.forgetExpiredLocked()
		}
		l = &rateLease{}
		rs.mu.leases[bk] = l
	}
	now := time.Now()
	if l.tokens > 0 && now.Before(l.expires) {
		l.tokens--
		rs.mu.Unlock()
		return true, nil
	}
	if now.Before(l.emptyUntil) {
		rs.mu.Unlock()
		return false, nil
	}
	returned := l.tokens // expired: they go back with this lease
	l.tokens = 0
	rs.mu.Unlock()

	got, err := opsqsql.New(rs.pool).RateTake(ctx, opsqsql.RateTakeParams{
		Key: bk.rule.key, Value: bk.value, PerSecond: bk.rule.perSecond, Capacity: bk.rule.capacity(),
		Want: bk.rule.slice(), Returned: returned,
	})
	if err != nil {
		return false, fmt.Errorf("leasing rate_limit tokens of %s = %s: %w", bk.rule.key, bk.value, err)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if got == 0 {
		// Not before the next token is due.
		wait := min(time.Duration(float64(time.Second)/bk.rule.perSecond), rateLeaseMaxTime)
		l.emptyUntil = time.Now().Add(wait)
		if !l.waking && rs.wake != nil {
			l.waking = true
			time.AfterFunc(wait, func() {
				rs.mu.Lock()
				l.waking = false
				rs.mu.Unlock()
				rs.wake(bk.rule.slice())
			})
		}
		return false, nil
	}
	if l.tokens == 0 {
		// Counted from before the lease was taken: its tokens are used within its
		// validity of the take, whatever the round trip took.
		l.expires = now.Add(bk.rule.validity())
	} // else another reserve's lease came first: these expire with its tokens, earlier
	l.tokens += got - 1
	return true, nil
}

// empty reports whether this instance found the bucket of one of the candidate's values
// empty a moment ago, and holds none of its tokens (for a preview, which takes none).
func (rs *rates) empty(values map[string]string, rules []rateRule) bool {
	if len(rules) == 0 {
		return false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	now := time.Now()
	for _, ru := range rules {
		v, ok := values[ru.key]
		if !ok {
			continue
		}
		if l := rs.mu.leases[bucketKey{ru, v}]; l != nil && l.tokens == 0 && now.Before(l.emptyUntil) {
			return true
		}
	}
	return false
}

// giveBack returns tokens taken for a chunk that was not handed out after all.
func (rs *rates) giveBack(taken []bucketKey) {
	if len(taken) == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, bk := range taken {
		if l := rs.mu.leases[bk]; l != nil {
			l.tokens++
		}
	}
}

// forgetExpiredLocked drops the leases that expired with no token due back soon; their
// unused tokens are lost to the bucket (a lower rate, never a higher one).
func (rs *rates) forgetExpiredLocked() {
	now := time.Now()
	for bk, l := range rs.mu.leases {
		if !now.Before(l.expires) && !now.Before(l.emptyUntil) && !l.waking {
			delete(rs.mu.leases, bk)
		}
	}
}

// rateCollectSchedule is how often the buckets that are full again are deleted.
const rateCollectSchedule = "@every 1m"

// collect deletes the buckets that are full again (cron).
func (rs *rates) collect(ctx context.Context) {
	if err := opsqsql.New(rs.pool).RateCollect(ctx); err != nil && ctx.Err() == nil {
		rs.log.Warn("collecting rate_limit buckets", slog.Any("error", err))
	}
}
