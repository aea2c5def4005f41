package outcome

import (
	"context"
	"log/slog"
	"sync"

	"opsq/queuer/panics"
	"opsq/queuer/startstop"
)

// Slicer moves the pending chunks of a large submission that a fail failed to
// chunks_failed by committed slices (queuer/internal/submissions.Store, whose cancel moves them the
// same way).
type Slicer interface {
	// SliceRows is the most pending chunks a fail that fails their submission skips in its
	// own statement, and how many chunk indexes a slice moves.
	SliceRows() int
	// SkipFailed moves the pending chunks of failed submission id, of total chunks, one
	// slice per transaction, until they are all moved, the submission is retried, or ctx
	// ends; what it leaves, it logs.
	SkipFailed(ctx context.Context, id, total int64)
}

// slicing runs the slices of the large submissions that fails recorded here failed, each
// on a goroutine of its own, after the fail's transaction has committed and its request
// (or the expiry of its lease) has been answered.
//
// They run in the background rather than in the request, unlike a cancel's: the fail is a
// consumer's outcome of one chunk, recorded once the submission row has moved (from then
// on no instance hands out, completes or fails another of its chunks), and a consumer is a
// worker that should go back to work, not wait a minute or more (10⁷ chunks are 100
// slices) for a move that changes nothing it can see; and a fail also comes from the
// expiry loop and from the abandon at a stop, which must not stall on it. The producer,
// who sees the counts, reads them growing until the move is done, as after a cancel that
// was cut. Each run is bounded (submissions' slicesTimeout, an hour) and ends at Stop:
// during a drain the slices go on; what a stop leaves is logged, and a retry of the
// submission's unfinished chunks, or the operator's SQL in docs/limits.md, finishes it.
//
// Its goroutines live from run until their slices end, at most until Stop, which waits for
// them. It is safe for concurrent use.
type slicing struct {
	slicer Slicer
	log    *slog.Logger
	mu     struct {
		sync.Mutex
		ctx    context.Context // the runs' context: nil before Start and after Stop
		cancel context.CancelFunc
	}
	running sync.WaitGroup
}

var _ startstop.Service = (*slicing)(nil)

// Start lets runs start; ctx bounds nothing (the runs end at Stop).
func (s *slicing) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.ctx, s.mu.cancel = context.WithCancel(context.WithoutCancel(ctx))
	return nil
}

// Stop ends the runs at their current slice and waits for them. Safe twice and before
// Start.
func (s *slicing) Stop() {
	s.mu.Lock()
	cancel := s.mu.cancel
	s.mu.ctx, s.mu.cancel = nil, nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.running.Wait()
}

// run starts moving the pending chunks of failed submission id, of total chunks, by
// slices; stopped (or not started), it leaves them, and logs it.
func (s *slicing) run(id, total int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx := s.mu.ctx
	if ctx == nil || s.slicer == nil {
		s.log.Warn("the chunks of a failed submission are left pending where they are (the instance stops): until they are moved "+
			"its status counts them neither done, failed nor skipped, and a retry of its unfinished chunks makes them all pending again",
			slog.Int64("submission_id", id), slog.Int64("chunks", total))
		return
	}
	s.running.Go(func() {
		_ = panics.Run(ctx, s.log, "moving the chunks of a failed submission by slices", func() error {
			s.slicer.SkipFailed(ctx, id, total)
			return nil
		})
	})
}
