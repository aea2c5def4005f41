package queuer

import "sync/atomic"

// Stats are this instance's counters, for metrics.
type Stats struct {
	Reservations     int // live
	ShardsOwned      int
	ShardsReservable int
	Reserved         int64
	Completed        int64
	FailedAttempts   int64
	Expired          int64
	Forwarded        int64
	ChunksIngested   int64
}

// counters are the monotonic counters of Stats that the reserve path keeps; the
// completer, the router and the submissions store keep their own.
type counters struct {
	reserved, failedAttempts, expired atomic.Int64
}

// Stats returns the instance's counters.
func (q *Queuer) Stats() Stats {
	owned := 0
	for s := range q.shardCount {
		if _, ok := q.claims.Lease(s); ok {
			owned++
		}
	}
	return Stats{
		Reservations:     q.reserver.Len(),
		ShardsOwned:      owned,
		ShardsReservable: len(q.claims.Reservable()),
		Reserved:         q.count.reserved.Load(),
		Completed:        q.completer.completed.Load(),
		FailedAttempts:   q.count.failedAttempts.Load(),
		Expired:          q.count.expired.Load(),
		Forwarded:        q.router.forwarded.Load(),
		ChunksIngested:   q.subs.ingested.Load(),
	}
}
