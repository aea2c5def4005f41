// Package submissions owns the submission rows from insert to deletion: it inserts them
// with their chunks (Submit, and SubmitMany for tools), reads, lists and waits for their
// state, cancels them, streams and follows their results, lists their failed chunks,
// retries, pauses and resumes them, deletes the expired ones (retention, a cron
// job), and mints their snowflake ids (IDs). The shard and random order of a chunk are
// here too (ShardOf, RandomOrder): written when a chunk is inserted, read by whoever must
// find it.
//
// It does not reserve, complete or fail chunks (queuer/internal/handout, queuer/internal/outcome): it learns
// that a submission finished from the events (notify.SubmissionFinished), and raises
// those of the changes it makes itself (new work, a cancelled submission).
package submissions

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/waiters"
	opsqsql "opsq/sql"
)

// Config configures a Store.
type Config struct {
	// ShardCount is the number of shards, as the database has it (claims.Settings,
	// fixed at the first migration). Required.
	ShardCount int
	Pool       opsqsql.Pool
	Log        *slog.Logger
	// Now tells where retention cuts.
	Now func() time.Time
	// Instance is this instance's id: an ingest by slices is recorded under it, and taken
	// for dead (its slices removed) once the instance is gone (ResumeSlices).
	Instance string
	// ResumeAfter is how long after a cancel or fail by slices ended its move is taken for
	// cut (ResumeSlices); 0: resumeAfterDefault (2 min).
	ResumeAfter time.Duration
	// IDs mints the submissions' ids.
	IDs *IDs
	// Admission bounds the requests that wait on this instance: WaitFinished counts among
	// them.
	Admission *waiters.Queue
	// Bus hears the changes Submit and Cancel make.
	Bus *notify.Bus
	// Ingested, if set, is called after a submission of n chunks has committed, before
	// Submit answers: the engine refreshes the planner's statistics of the chunk table
	// there when the ingest left them far behind (handout.Path.AfterIngest).
	Ingested func(ctx context.Context, n int64)
	// SliceRows is how many chunks of a large object-storage submission go in per
	// committed slice, and how many chunk indexes a cancel, or a fail that fails its
	// submission, of more pending chunks than that moves per slice. Tests set it small.
	// Defaults to SliceRows.
	SliceRows int
	// AfterSlice, if set, is called after each committed slice of an insert, a cancel or a
	// fail with the chunk indexes done so far. For tests. Defaults to nil.
	AfterSlice func(done int64)
	// AfterCancel, if set, is called when a cancel of submission id has committed its
	// first transaction, before it answers. For tests. Defaults to nil.
	AfterCancel func(id int64)
	// AfterRetry, if set, is called when a retry of submission id has committed, before it
	// answers. For tests. Defaults to nil.
	AfterRetry func(id int64)
	// MaxMovesPerMinute bounds the chunks one caller (an API key by its name; every
	// request without a key together) moves by pauses and resumes in any minute on this
	// instance (moves.go). Defaults to MaxMovesPerMinuteDefault (2 000 000).
	MaxMovesPerMinute int64
}

// Store is the submissions of the database. It is safe for concurrent use and has no
// goroutine of its own.
type Store struct {
	cfg Config
	// shardCount is Config.ShardCount.
	shardCount int
	finished   *waiters.ByKey // WaitFinished, woken by the NOTIFY of a finished submission
	progress   *waiters.ByKey // FollowResults, woken by the NOTIFYs of progress and of the end
	ingested   atomic.Int64   // chunks inserted here, for Stats
	ended      chan struct{}  // closed by EndWaits
	endOnce    sync.Once

	tenants tenantCache // TenantsOf
	// slicing is the ids whose chunks this instance moves by slices now (skipSlices): the
	// resume job leaves them to it.
	slicing sync.Map
	// moves bounds pauses and resumes (moves.go).
	moves moves
}

var _ notify.Handler = (*Store)(nil)

// New returns the store of cfg.Pool's submissions.
func New(cfg Config) *Store {
	return &Store{cfg: cfg, shardCount: cfg.ShardCount, finished: waiters.NewByKey(), progress: waiters.NewByKey(), ended: make(chan struct{})}
}

// Ingested is how many chunks were inserted here.
func (s *Store) Ingested() int64 { return s.ingested.Load() }

// Handle wakes the waits on a submission that finished, the followers of a submission
// that progressed or finished, and every wait when notifications may have been missed.
func (s *Store) Handle(e notify.Event) {
	switch e := e.(type) {
	case notify.SubmissionProgress:
		for _, id := range e.IDs {
			s.progress.Wake(id)
		}
	case notify.SubmissionFinished:
		s.finished.Wake(e.ID)
		s.progress.Wake(e.ID)
	case notify.Resync:
		s.finished.WakeAll()
		s.progress.WakeAll()
	}
}

// EndWaits ends every wait on a submission, now and from now on: they answer the state as
// it is (the instance drains). Followers of results look again. Safe twice.
func (s *Store) EndWaits() {
	s.endOnce.Do(func() { close(s.ended) })
	s.finished.WakeAll()
	s.progress.WakeAll()
}
