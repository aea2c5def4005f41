// Package handout is the reserve path of one instance: it walks a strategy tree over the
// shards this instance owns (walk.go), streams each leaf's candidates from the database
// (the candidate queries strategy compiles, on connections of their own) and takes them
// into the in-memory reserver, signing a token for each. What keeps that cheap lives here
// too: reserves at the same moment share one scan (shared.go), a scan's rest is kept as
// the leaf's buffer (buffer.go), ordered scans resume past runs of reserved chunks
// (hints.go), the submissions' metadata is cached (infos.go), and chunks finished while a
// scan runs are tombstoned so that it cannot hand them out (tombstones.go). It holds the
// max_simultaneous slots in the database (holds.go), leases rate_limit tokens (rates.go), previews a reserve (preview.go),
// counts the chunks it hands out per value of the keys limited (Config.ValueRates), and
// keeps the planner's statistics of its partitions honest (planstats.go).
//
// It does not forward a reserve to other instances (queuer/peers), wait for work
// (queuer/waiters), or record outcomes (queuer/outcome). It learns of every change to the
// chunks it caches from the events (Handle), and raises those it makes itself (chunks it
// gives back).
package handout
