// Package handout hands out chunks: it is the reserve path of one instance, from a
// request to the chunks reserved for it on the shards this instance owns.
//
// It owns the reserve itself: a strategy tree walked over this instance's shards, each
// leaf's candidates streamed from the database and taken one by one into the in-memory
// reserver under a signed token, each through the same ordered admission checks. It owns
// what keeps that cheap (reserves of the same moment share one run, a scan's rest is kept
// as its leaf's buffer, ordered scans resume past runs of reserved chunks, the
// submissions' metadata is cached), and what keeps it right (tombstones for the chunks
// finished or retried while a scan runs, the global max_simultaneous slots, the
// rate_limit token leases). It also gives back the chunks a reserve could not deliver, previews a
// reserve, counts the chunks it hands out per value of the keys limited
// (Config.ValueRates), and keeps the planner's statistics of the chunk table honest. It
// learns of every change to what it caches from the events (Handle), and raises the one
// it makes itself: chunks given back.
//
// It does not lease its shards (package claims: it reads their leases, and publishes
// their in-flight counts), keep the reservations (package reserver), forward a reserve
// to other instances (package peers), wait for work (package waiters), record outcomes
// (package outcome), or check a request's bounds (package api). Its statements are
// package sql's; the candidate queries are compiled by package strategy.
//
// Where things are:
//
//	path.go        Path: configuration, start and stop, the periodic jobs, the events
//	shared.go      Reserve: the reserves of one moment share a run
//	run.go         a run and its lifetime: its requests, their answers, chunks given back
//	walk.go        the walk of a strategy tree, for a run and a preview alike
//	fair.go        weighted_fair's turns (a deficit round robin)
//	scan.go        the scan of a leaf's candidates: from its buffer, over the shards,
//	               or over a few submissions one by one
//	take.go        the take: candidates through the admission checks, with one undo
//	buffer.go      the candidates a scan read past its answers, for the next reserves
//	hints.go       where an ordered scan resumes, past its run of reserved chunks
//	infos.go       the submissions' metadata, cached
//	tombstones.go  the chunks finished or retried while a scan runs
//	tenants.go     requests confined to tenants; the submissions looked up before a scan
//	holds.go       the max_simultaneous slots (opsq.holds)
//	rates.go       the rate_limit token leases (opsq.rate_buckets)
//	answer.go      what a chunk takes in an answer (Request.MaxBytes)
//	preview.go     Preview: what a reserve would hand out, taking nothing
//	planstats.go   the planner's statistics of the chunk table
package handout
