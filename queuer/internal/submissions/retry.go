package submissions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// lockAttempts bounds the reads of a submission's lock that find it between two tables (it
// moved while the read waited for its lock).
const lockAttempts = 3

// placeBatch is how many failed chunks without a shard (failed before migration 00007) a
// retry places per statement.
const placeBatch = 10_000

// lock locks submission id's row in q's transaction, in whichever table it is, and reads its state;
// ErrNotFound for an unknown submission.
func lock(ctx context.Context, db opsqsql.Queries, id int64) (opsqsql.SubmissionLockAnyRow, error) {
	for range lockAttempts - 1 {
		r, err := db.SubmissionLockAny(ctx, opsqsql.SubmissionLockAnyParams{ID: id})
		if !errors.Is(err, opsqsql.ErrNotFound) {
			return r, err
		}
	}
	r, err := db.SubmissionLockAny(ctx, opsqsql.SubmissionLockAnyParams{ID: id})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return r, ErrNotFound
	}
	return r, err
}

// Retry gives the submission's failed chunks (with opts.Unfinished, its skipped ones too;
// with opts.ChunkIndexes, only those named, failed or skipped) a fresh attempt budget (retries 0, and opts.MaxRetries if set) and makes them reservable
// (they wait if the submission is paused, or its not_before is ahead); completed outputs
// stay, the errors of the chunks retried are forgotten, and a finished submission (failed;
// cancelled, with Unfinished) is in progress again, its finished_at and failure gone, and
// paused only if it was cancelled while paused (a retry never lifts a pause). All in one
// transaction that holds the submission's lock, so that a retry racing a cancel (or the
// fail of its last chunk) happens wholly before or after it; the status it returns is the
// one it left, read in that transaction (a cancel the instant after answers for itself).
// A retry that would take the submission's tenant past a quota (back in progress, or its
// chunks pending again) is refused with a *QuotaError, as a submit of that work would be,
// and changes nothing.
// ErrNothingToRetry when there is nothing to retry (completed; cancelled without
// Unfinished; no chunk failed or skipped), ErrNotFound for an unknown submission. It returns
// the submission's new state.
func (s *Store) Retry(ctx context.Context, id int64, opts RetryOptions) (Status, error) {
	tenant, err := s.TenantOf(ctx, id) // never changes: read before, from the cache
	if err != nil {
		return Status{}, err
	}
	var work workMoved
	var left opsqsql.SubmissionStatusRow
	err = opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
		work = workMoved{}
		return opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
			var err error
			if work, err = s.retry(ctx, q, id, tenant, opts); err != nil {
				return err
			}
			if left, err = q.SubmissionStatus(ctx, opsqsql.SubmissionStatusParams{ID: id}); err != nil {
				return fmt.Errorf("reading the status it leaves: %w", err)
			}
			return nil
		})
	})
	var quota *QuotaError
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNothingToRetry) || errors.As(err, &quota) {
		return Status{}, err
	}
	if err != nil {
		return Status{}, fmt.Errorf("retrying submission %d: %w", id, err)
	}
	s.raiseWork(work)
	s.retried(ctx, id)
	if s.cfg.AfterRetry != nil {
		s.cfg.AfterRetry(id)
	}
	return statusOf(left), nil
}

// retried, after a retry of submission id committed, looks at it as a child (held for
// parents that failed, it is cancelled again at once) and re-arms the children it
// cancelled, down the chain (dependencies.go). An error is logged, not returned: the retry
// stands, and the periodic re-check does the rest within seconds.
func (s *Store) retried(ctx context.Context, id int64) {
	ctx = context.WithoutCancel(ctx)
	err := s.settleChildren(ctx, opsqsql.DependentsDueParams{Children: []int64{id}})
	if err == nil {
		err = s.rearmChildren(ctx, opsqsql.DependentsRearmParams{Parents: []int64{id}})
	}
	if err != nil {
		s.cfg.Log.WarnContext(ctx, "re-arming the children of a retried submission; the periodic re-check does it within seconds",
			slog.Int64("submission_id", id), slog.Any("error", err))
	}
}

// retry is Retry's transaction, for a submission of tenant.
func (s *Store) retry(ctx context.Context, q opsqsql.Queries, id int64, tenant string, opts RetryOptions) (workMoved, error) {
	db := q
	sub, err := lock(ctx, db, id)
	if err != nil {
		return workMoved{}, err
	}
	state := opsqtype.State(sub.State)
	switch {
	case state == opsqtype.StateCompleted, state == opsqtype.StateCancelled && !opts.Unfinished && opts.ChunkIndexes == nil:
		return workMoved{}, ErrNothingToRetry
	}
	// After the submission's lock (a submit takes the tenant's alone: no cycle).
	quota, err := holdQuota(ctx, db, tenant)
	if err != nil {
		return workMoved{}, err
	}
	if err := s.place(ctx, db, id, opts.Unfinished || opts.ChunkIndexes != nil); err != nil {
		return workMoved{}, err
	}
	// A child waits on its parents again while they do not let it start; the children a
	// failed or cancelled parent cancelled are marked to re-arm (dependencies.go).
	held, err := s.retryDependencies(ctx, q, id)
	if err != nil {
		return workMoved{}, err
	}
	rows, err := db.ChunksRetryFailed(ctx, opsqsql.ChunksRetryFailedParams{
		// Paused: in progress and paused, or cancelled while paused (a retry keeps the pause);
		// or held for its parents, as a pause holds them (ready_at 'infinity').
		SubmissionID: id, Unfinished: opts.Unfinished, Paused: sub.Paused || held, ChunkIndexes: opts.ChunkIndexes,
	})
	if err != nil {
		return workMoved{}, err
	}
	var work workMoved
	p := opsqsql.SubmissionRetryParams{ID: id, MaxRetries: opts.MaxRetries}
	for _, r := range rows {
		if r.Skipped {
			p.Skipped += r.N
		} else {
			p.Failed += r.N
		}
		if r.Reservable {
			work.add(r.Shard, r.N)
		}
	}
	if (state == opsqtype.StateCancelled || state == opsqtype.StateFailed) && sub.Unmoved > 0 {
		// Cancelled or failed by slices that have not moved every chunk yet (they stop at the
		// next slice, finding it in progress), or whose instance stopped between two: the
		// rest are pending where they were, never skipped, made reservable again by the
		// reopen (a retry of the failed chunks only too). Announced over every shard, as the
		// submission's chunks are spread.
		work.n += sub.Unmoved
		work.spread = true
	}
	if p.Failed+p.Skipped == 0 && sub.Unmoved == 0 {
		return workMoved{}, ErrNothingToRetry
	}
	if state == opsqtype.StateInProgress {
		err = db.SubmissionRetryCounters(ctx, p)
	} else {
		err = db.SubmissionReopen(ctx, p)
	}
	if err != nil {
		return workMoved{}, err
	}
	if err := quota.check(ctx, db); err != nil {
		return workMoved{}, err
	}
	return work, s.announce(ctx, q, work)
}

// retryDependencies is the part of a retry of submission id, in q's transaction, that
// concerns dependencies: as a child, it waits on its parents again while they do not let
// it start (held: its chunks come back held), and every instance is told they have a
// child waiting; as a parent, the children it cancelled are marked to re-arm, and every
// instance told so, so that the re-arm happens even if this instance stops first.
func (s *Store) retryDependencies(ctx context.Context, q opsqsql.Queries, id int64) (held bool, err error) {
	child, err := q.DependentRetry(ctx, id)
	switch {
	case errors.Is(err, opsqsql.ErrNotFound):
	case err != nil:
		return false, err
	case child.Waiting:
		if err := notify.SendParents(ctx, q, child.Parents...); err != nil {
			return false, err
		}
		held = true
	}
	marked, err := q.DependentsRearmMark(ctx, id)
	if err != nil || !marked {
		return held, err
	}
	return held, notify.SendParents(ctx, q, id)
}

// place gives the failed (with unfinished, also skipped) chunks of submission id that
// were failed before migration 00007 their shard and random order, a batch at a time.
func (s *Store) place(ctx context.Context, db opsqsql.Queries, id int64, unfinished bool) error {
	after := int32(-1)
	for {
		idxs, err := db.ChunksFailedUnplaced(ctx, opsqsql.ChunksFailedUnplacedParams{
			SubmissionID: id, Unfinished: unfinished, After: after, Limit: placeBatch,
		})
		if err != nil || len(idxs) == 0 {
			return err
		}
		p := opsqsql.ChunksFailedPlaceParams{
			SubmissionID: id, ChunkIndexes: idxs,
			Shards: make([]int32, len(idxs)), RandomOrders: make([]int32, len(idxs)),
		}
		for i, idx := range idxs {
			p.Shards[i] = int32(opsqtype.ShardOf(id, int(idx), s.shardCount))
			p.RandomOrders[i] = int32(opsqtype.RandomOrder(id, int(idx), s.shardCount))
		}
		if err := db.ChunksFailedPlace(ctx, p); err != nil {
			return err
		}
		after = idxs[len(idxs)-1]
	}
}

// RetryMany retries (as Retry, each in its own transaction) every submission that sel
// selects (State defaults to failed), newest first, at most sel.Limit (1 to
// RetryManyMax), and returns the ids retried; those with nothing to retry (or gone since
// they were selected) are left out.
func (s *Store) RetryMany(ctx context.Context, sel ListOptions, opts RetryOptions) ([]int64, error) {
	sel.State = cmp.Or(sel.State, opsqtype.StateFailed)
	sel.Limit = min(max(sel.Limit, 1), RetryManyMax)
	sel.After = 0
	list, _, err := s.List(ctx, sel)
	if err != nil {
		return nil, err
	}
	retried := []int64{}
	for _, st := range list {
		_, err := s.Retry(ctx, st.ID, opts)
		switch {
		case errors.Is(err, ErrNothingToRetry), errors.Is(err, ErrNotFound):
		case err != nil:
			return retried, err
		default:
			retried = append(retried, st.ID)
		}
	}
	return retried, nil
}

// workMoved is the chunks a retry or a resume made reservable, per shard.
type workMoved struct {
	byShard map[int]int64
	n       int64
	spread  bool // some of the chunks are anywhere: announce every shard
}

func (w *workMoved) add(shard int, n int64) {
	if w.byShard == nil {
		w.byShard = map[int]int64{}
	}
	w.byShard[shard] += n
	w.n += n
}

// shards names the shard of each chunk (a shard twice: two chunks), or nil when they are
// as many as the shards (or some are anywhere, spread): then they are announced as
// spread over every shard.
func (s *Store) shards(w workMoved) []int {
	if w.n >= int64(s.shardCount) || w.spread {
		return nil
	}
	var out []int
	for shard, n := range w.byShard {
		for range n {
			out = append(out, shard)
		}
	}
	return out
}

// announce tells every instance, at the commit of q's transaction, where the chunks of w are.
func (s *Store) announce(ctx context.Context, q opsqsql.Queries, w workMoved) error {
	if w.n == 0 {
		return nil
	}
	if shards := s.shards(w); shards != nil {
		return notify.SendWork(ctx, q, shards)
	}
	return notify.SendWorkAll(ctx, q, w.n)
}

// raiseWork raises the chunks of w here at once, not only when the NOTIFY comes back, as
// Submit does: a reserve here after the retry or resume sees them wherever they sort.
func (s *Store) raiseWork(w workMoved) {
	if w.n == 0 {
		return
	}
	s.cfg.Bus.Raise(notify.NewWork{Shards: s.shards(w), Chunks: int(min(w.n, 1<<31-1)), Local: true})
}
