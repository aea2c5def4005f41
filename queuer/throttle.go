package queuer

import (
	"context"
	"time"
)

// Consumers' back-pressure (POST /v1/throttle), the throttles part's.

// Throttle throttles key = value (canonical JSON text) for d, in each of tenants (nil:
// every tenant), on every instance that holds shards before it returns, and returns when
// the throttle ends, by the database's clock. The caller checks d and the value.
func (q *Queuer) Throttle(ctx context.Context, key, value string, tenants []string, d time.Duration) (time.Time, error) {
	return q.throttle.Set(ctx, key, value, tenants, d)
}

// ThrottlesInForce returns the throttles in force on this instance, those that end last
// first.
func (q *Queuer) ThrottlesInForce() []Throttle { return q.throttle.InForce() }
