package queuer

import (
	"context"
	"time"

	"opsq/queuer/internal/throttles"
)

// Consumers' back-pressure (POST and DELETE /v1/throttle), the throttles part's.

// Bounds of the throttles in force (docs/rates.md): a new throttle past one is refused with
// a *ThrottleLimitError.
const (
	MaxThrottlesPerTenant = throttles.MaxPerTenant
	MaxThrottlesPerKey    = throttles.MaxPerKey
)

// ThrottleLimitError is a throttle refused at a tenant's or an API key's bound.
type ThrottleLimitError = throttles.LimitError

// ErrNoThrottle is a lift of a throttle that is not in force.
var ErrNoThrottle = throttles.ErrNotInForce

// Throttle throttles key = value (canonical JSON text) for d, in each of tenants (nil:
// every tenant), on every instance that holds shards before it returns, and returns when
// the throttle ends, by the database's clock. The caller checks d and the value. The API
// key of ctx's caller (package identity) is recorded as its setter, and bounded.
func (q *Queuer) Throttle(ctx context.Context, key, value string, tenants []string, d time.Duration) (time.Time, error) {
	return q.throttle.Set(ctx, key, value, tenants, d)
}

// LiftThrottle ends the throttles of key = value (canonical JSON text) in each of tenants
// ("": the throttle of every tenant; nil: all of them) at once, on every instance that
// holds shards before it returns, and returns how many were in force; ErrNoThrottle when
// none was.
func (q *Queuer) LiftThrottle(ctx context.Context, key, value string, tenants []string) (int, error) {
	return q.throttle.Lift(ctx, key, value, tenants)
}

// ThrottlesInForce returns the throttles in force on this instance, those that end last
// first.
func (q *Queuer) ThrottlesInForce() []Throttle { return q.throttle.InForce() }
