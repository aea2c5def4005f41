package queuer

import (
	"opsq/claims"
	"opsq/queuer/internal/admin"
)

// ClusterStats is the cluster at a glance, as the database says (admin.ClusterStats).
type ClusterStats = admin.ClusterStats

// Overview is the dashboard's cluster at a glance (admin.Overview).
type Overview = admin.Overview

// Cluster is the instances and their claims (admin.Cluster).
type Cluster = admin.Cluster

// ClusterStatsTTL is how long the cluster's figures are cached (admin.ClusterStatsTTL).
const ClusterStatsTTL = admin.ClusterStatsTTL

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

// Stats returns the instance's counters, each read from the part that keeps it.
func (q *Queuer) Stats() Stats {
	owned := 0
	for s := range q.shardCount {
		if _, ok := q.claims.Lease(s); ok {
			owned++
		}
	}
	completed, failedAttempts, expired := q.outcomes.Counts()
	return Stats{
		Reservations:     q.reserver.Len(),
		ShardsOwned:      owned,
		ShardsReservable: len(q.claims.Reservable()),
		Reserved:         q.reserve.Reserved(),
		Completed:        completed,
		FailedAttempts:   failedAttempts,
		Expired:          expired,
		Forwarded:        q.router.Counts().Forwarded,
		ChunksIngested:   q.subs.Ingested(),
	}
}

// Metrics is what an operator watches and alerts on, beyond Stats: the requests waiting
// here, the requests forwarded to other instances by outcome, and the claims loop.
type Metrics struct {
	Stats
	// Waiting counts the requests waiting on this instance now: reserves with a wait and
	// status waits, against Config.MaxWaiters.
	Waiting int64
	// Reserves forwarded to another instance, by outcome: chunks came back (Served), the
	// peer had none (Empty), the peer gave no answer (Failed).
	ForwardServed, ForwardEmpty, ForwardFailed int64
	// Extends forwarded to a shard's owner, answered (ExtendForwardOK) or not.
	ExtendForwardOK, ExtendForwardFailed int64
	Claims                               claims.Stats
	// ChildrenWaiting is how many submissions wait on their parents, as this instance
	// last counted them (every 5 s while any wait).
	ChildrenWaiting int64
}

// Metrics returns the instance's counters and gauges.
func (q *Queuer) Metrics() Metrics {
	c := q.router.Counts()
	return Metrics{
		Stats:         q.Stats(),
		Waiting:       q.waiting.Waiting(),
		ForwardServed: c.ReserveServed, ForwardEmpty: c.ReserveEmpty, ForwardFailed: c.ReserveFailed,
		ExtendForwardOK: c.ExtendOK, ExtendForwardFailed: c.ExtendFailed,
		Claims: q.claims.Stats(), ChildrenWaiting: q.deps.Waiting(),
	}
}
