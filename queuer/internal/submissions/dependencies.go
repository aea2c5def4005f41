package submissions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// Submissions after other submissions (DESIGN.md §3 "Dependencies", docs/dependencies.md).
// A child is inserted at once, its chunks held in opsq.chunks_waiting at 'infinity' (as a
// pause holds them: no reserve reads past them, no promoter moves them) while a parent is
// in progress. Whenever a submission finishes, every instance hears it (the NOTIFY on
// opsq_finished that every finish sends, whoever made it) and the Dependents loop looks at
// its children: it starts those whose parents let them (their chunks move in, as a
// resume's do, with the NOTIFY of new work), and cancels, naming the parent, those a
// failed or cancelled parent stops (policy completed); their own finish cascades down the
// chain the same way. A retry of a parent re-arms the children it cancelled (Store.Retry).
// The complete path runs nothing of this: a plain workload pays one small statement per
// instance per batch of finished submissions, in this loop, off the request path.

// The policies of a child (NewSubmission.AfterPolicy).
const (
	// AfterCompleted: the child starts when every parent completed; a parent that failed
	// or was cancelled cancels it. The default.
	AfterCompleted = "completed"
	// AfterFinished: the child starts when every parent finished, whatever its state.
	AfterFinished = "finished"
)

// MaxParents bounds a child's after.
const MaxParents = 100

// Bounds of the Dependents loop.
const (
	// dependentsSweep is how often each instance looks at every waiting child and every
	// child cancelled by a parent retried since: what recovers an arming lost between a
	// finish and its NOTIFY (an instance killed, the listener reconnecting), or between a
	// retry and its re-arm.
	dependentsSweep = 5 * time.Second
	// dependentsBatch is how many children one statement reads.
	dependentsBatch = 1000
	// dependentsTimeout bounds one pass.
	dependentsTimeout = time.Minute
)

// ParentError is a parent a child may not have: Index is its place in after (the field
// after[Index]); Reason says why.
type ParentError struct {
	Index  int
	Reason string
}

func (e *ParentError) Error() string { return fmt.Sprintf("after[%d]: %s", e.Index, e.Reason) }

// checkParents checks sub's parents (each a submission of its tenant) and reports whether
// its chunks must wait for them: a parent already finished counts at once.
func (s *Store) checkParents(ctx context.Context, sub NewSubmission) (held bool, err error) {
	if len(sub.After) > MaxParents {
		return false, &ParentError{Index: MaxParents, Reason: fmt.Sprintf("a submission has at most %d parents", MaxParents)}
	}
	switch sub.AfterPolicy {
	case "", AfterCompleted, AfterFinished:
	default:
		return false, fmt.Errorf("after_policy %q: must be %q or %q", sub.AfterPolicy, AfterCompleted, AfterFinished)
	}
	rows, err := opsqsql.New(s.cfg.Pool).DependenciesCheck(ctx, opsqsql.DependenciesCheckParams{Parents: sub.After, Tenant: sub.Tenant})
	if err != nil {
		return false, fmt.Errorf("reading the parents: %w", err)
	}
	for _, r := range rows {
		if r.State == nil {
			return false, &ParentError{Index: int(r.Position), Reason: fmt.Sprintf("no submission %d (of this tenant)", sub.After[r.Position])}
		}
		switch opsqtype.State(*r.State) {
		case opsqtype.StateInProgress:
			held = true
		case opsqtype.StateFailed, opsqtype.StateCancelled:
			held = held || sub.AfterPolicy != AfterFinished // the re-check cancels it at once
		}
	}
	return held, nil
}

// childInserted looks at a child just committed whose chunks wait: a parent that finished
// between the check and the commit lets it start (or cancels it) now. Either the finish's
// own look saw the child committed, or this one sees the parent finished. An error is
// logged: the periodic re-check finds the child.
func (s *Store) childInserted(ctx context.Context, id int64, sub NewSubmission) {
	if !sub.held {
		return
	}
	if err := s.settleChildren(context.WithoutCancel(ctx), opsqsql.DependentsDueParams{Children: []int64{id}}); err != nil {
		s.cfg.Log.WarnContext(ctx, "looking at the parents of a new submission; the periodic re-check does it within seconds",
			slog.Int64("submission_id", id), slog.Any("error", err))
	}
}

// settleChildren starts or cancels the waiting children that p selects and that may act
// now, a batch at a time (each child in a transaction of its own).
func (s *Store) settleChildren(ctx context.Context, p opsqsql.DependentsDueParams) error {
	db := opsqsql.New(s.cfg.Pool)
	p.Limit = dependentsBatch
	for {
		due, err := db.DependentsDue(ctx, p)
		if err != nil {
			return fmt.Errorf("reading the children that may start: %w", err)
		}
		acted := 0
		for _, d := range due {
			var ok bool
			if d.BlockedBy == nil {
				ok, err = s.startChild(ctx, d.ID)
			} else {
				ok, err = s.cancelChild(ctx, d.ID, *d.BlockedBy, fmt.Sprintf("parent %d %s", *d.BlockedBy, *d.BlockedState))
			}
			if err != nil {
				return err
			}
			if ok {
				acted++
			}
		}
		// A full batch of which some acted: those read again are others. One where none
		// acted (each taken by another instance meanwhile) would read the same again.
		if len(due) < p.Limit || acted == 0 {
			return nil
		}
	}
}

// startChild lets a waiting child start: in one transaction holding its lock, it waits no
// more, and, unless paused (then its resume does it), its held chunks become reservable (or
// wait for its not_before), announced by NOTIFY. False when it was no longer waiting.
func (s *Store) startChild(ctx context.Context, id int64) (bool, error) {
	var work workMoved
	started := false
	err := opsqsql.Retry(ctx, opsqsql.RetryConflicts, func() error {
		work, started = workMoved{}, false
		return opsqsql.InTx(ctx, s.cfg.Pool, func(q opsqsql.Queries) error {
			sub, err := lock(ctx, q, id)
			if err != nil || opsqtype.State(sub.State) != opsqtype.StateInProgress {
				return err
			}
			var total int64
			if started, total, err = q.DependentStart(ctx, id); err != nil || !started {
				return err
			}
			if total == 0 { // no chunks: completed now, as a submission without chunks is at once
				if err := q.SubmissionsFinishCompleted(ctx, opsqsql.SubmissionsFinishCompletedParams{IDs: []int64{id}}); err != nil {
					return err
				}
				return notify.SendFinished(ctx, q, id)
			}
			if sub.Paused {
				return nil
			}
			rows, err := q.SubmissionResume(ctx, opsqsql.SubmissionPauseParams{ID: id}) // paused stays false
			if err != nil {
				return err
			}
			for _, r := range rows {
				work.add(r.Shard, r.N)
			}
			return s.announce(ctx, q, work)
		})
	})
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("starting submission %d after its parents: %w", id, err)
	}
	s.raiseWork(work)
	return started, nil
}

// errNotWaiting rolls back the cancel of a child that another instance started or
// cancelled meanwhile.
var errNotWaiting = errors.New("the child waits no more")

// cancelChild cancels a waiting child because of parent (policy completed), its status's
// failure saying why, in the cancel's first transaction. False when it was no longer
// waiting.
func (s *Store) cancelChild(ctx context.Context, id, parent int64, why string) (bool, error) {
	_, err := s.cancel(ctx, id, func(q opsqsql.Queries) error {
		sub, err := lock(ctx, q, id)
		if err != nil {
			return err
		}
		if opsqtype.State(sub.State) != opsqtype.StateInProgress {
			return errNotWaiting
		}
		ok, err := q.DependentCancel(ctx, opsqsql.DependentCancelParams{ID: id, Parent: parent, Failure: why})
		if err == nil && !ok {
			err = errNotWaiting
		}
		return err
	})
	switch {
	case errors.Is(err, errNotWaiting), errors.Is(err, ErrNotFound), errors.Is(err, ErrFinished):
		return false, nil
	case errors.Is(err, ErrRetriedWhileCancelled): // cancelled by slices, retried meanwhile
		return true, nil
	case err != nil:
		return false, fmt.Errorf("cancelling submission %d after parent %d: %w", id, parent, err)
	}
	return true, nil
}

// rearmChildren re-arms the children that the parents p selects cancelled and whose retry
// marked them (dependents_rearm_mark.sql): each child's skipped chunks come back held (a
// retry of its unfinished chunks, Retry) and it waits on its parents again; then its own
// children, down the chain. A child that cannot come back (its tenant over a quota) is
// logged and left cancelled, still marked; the periodic re-check tries it again.
func (s *Store) rearmChildren(ctx context.Context, p opsqsql.DependentsRearmParams) error {
	db := opsqsql.New(s.cfg.Pool)
	p.Limit = dependentsBatch
	for {
		rows, err := db.DependentsRearm(ctx, p)
		if err != nil {
			return fmt.Errorf("reading the children to re-arm: %w", err)
		}
		var rearmed []int64
		for _, r := range rows {
			_, err := s.Retry(ctx, r.ID, RetryOptions{Unfinished: true})
			var quota *QuotaError
			switch {
			case errors.Is(err, ErrNothingToRetry), errors.Is(err, ErrNotFound):
			case errors.As(err, &quota):
				s.cfg.Log.WarnContext(ctx, "a retried parent's child stays cancelled: its tenant is over a quota; it is tried again every few seconds",
					slog.Int64("submission_id", r.ID), slog.Int64("parent", r.CancelledBy), slog.Any("error", err))
			case err != nil:
				return fmt.Errorf("re-arming submission %d after parent %d was retried: %w", r.ID, r.CancelledBy, err)
			default:
				rearmed = append(rearmed, r.ID)
			}
		}
		if len(rows) < p.Limit || len(rearmed) == 0 {
			return nil
		}
	}
}

// Dependencies is what a child's status adds.
type Dependencies struct {
	// After is the parents, in the order given; WaitingOn those in progress.
	After     []int64
	WaitingOn []int64
	// Policy is AfterCompleted or AfterFinished.
	Policy string
	// Failure is why a parent's end cancelled it ("parent 123 failed"); "" when none did.
	Failure string
}

// dependenciesOf reads submission id's parents; nil when it is no child.
func (s *Store) dependenciesOf(ctx context.Context, id int64) (*Dependencies, error) {
	r, err := opsqsql.New(s.cfg.Pool).DependenciesStatus(ctx, id)
	if errors.Is(err, opsqsql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the parents of submission %d: %w", id, err)
	}
	d := &Dependencies{After: r.After, WaitingOn: r.WaitingOn, Policy: r.Policy}
	if r.Failure != nil {
		d.Failure = *r.Failure
	}
	return d, nil
}

// Dependents is the loop that acts on the children of the submissions that finished, on
// every instance. It keeps in memory the parents that have children to act on (loaded at
// Start, kept by the NOTIFYs of new children, notify.ParentsWaited, and reloaded at each
// re-check), so that a submission that finishes without children costs nothing: a batch
// of parents that finished (notify.SubmissionFinished) costs one statement, which finds
// their waiting children that may start or must be cancelled. While it knows of any such
// parent, every dependentsSweep, and after notifications may have been missed
// (notify.Resync), it re-checks: it reloads the parents, and looks at every waiting child
// and every child to re-arm. Instances share the work: each child's start or cancel is
// taken by one. Its goroutine lives from Start until Stop; Handle is safe for concurrent
// use.
type Dependents struct {
	store *Store
	wake  chan struct{}
	mu    struct {
		sync.Mutex
		parents  map[int64]struct{} // parents with children to act on
		added    []int64            // parents heard of while a reload runs
		loading  bool
		finished []int64 // parents that finished, to act on
		sweep    bool
	}
	waiting atomic.Int64 // Waiting
	startstop.Loop
}

var (
	_ startstop.Service = (*Dependents)(nil)
	_ notify.Handler    = (*Dependents)(nil)
)

// NewDependents returns the loop over store's children; subscribe it to the bus and
// Start it.
func NewDependents(store *Store) *Dependents {
	d := &Dependents{store: store, wake: make(chan struct{}, 1)}
	d.mu.parents = map[int64]struct{}{}
	return d
}

// Handle notes the parents that have children, those of them that finished, and a
// Resync, for the loop.
func (d *Dependents) Handle(e notify.Event) {
	d.mu.Lock()
	switch e := e.(type) {
	case notify.ParentsWaited:
		for _, id := range e.IDs {
			d.mu.parents[id] = struct{}{}
		}
		if d.mu.loading {
			d.mu.added = append(d.mu.added, e.IDs...)
		}
		d.mu.Unlock()
		return
	case notify.SubmissionFinished:
		if _, ok := d.mu.parents[e.ID]; !ok {
			d.mu.Unlock()
			return
		}
		d.mu.finished = append(d.mu.finished, e.ID)
	case notify.Resync:
		d.mu.sweep = true
	default:
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Start loads the parents with children to act on, and starts the loop.
func (d *Dependents) Start(ctx context.Context) error {
	if err := d.reload(ctx); err != nil {
		return err
	}
	d.Go(ctx, func(ctx context.Context) {
		tick := time.NewTicker(dependentsSweep)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.wake:
			case <-tick.C:
				d.mu.Lock()
				d.mu.sweep = d.mu.sweep || len(d.mu.parents) > 0
				d.mu.Unlock()
			}
			d.mu.Lock()
			finished, sweep := d.mu.finished, d.mu.sweep
			d.mu.finished, d.mu.sweep = nil, false
			d.mu.Unlock()
			if err := d.pass(ctx, finished, sweep); err != nil && ctx.Err() == nil {
				d.store.cfg.Log.Warn("acting on the children of finished submissions; the re-check tries again within seconds", slog.Any("error", err))
				d.mu.Lock()
				d.mu.sweep = true // at the next tick
				d.mu.Unlock()
			}
		}
	})
	return nil
}

// reload reads the parents with children to act on again.
func (d *Dependents) reload(ctx context.Context) error {
	d.mu.Lock()
	d.mu.loading, d.mu.added = true, nil
	d.mu.Unlock()
	r, err := opsqsql.New(d.store.cfg.Pool).DependentsParents(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.loading = false
	if err != nil {
		return fmt.Errorf("reading the parents with children waiting: %w", err)
	}
	parents := make(map[int64]struct{}, len(r.Parents)+len(d.mu.added))
	for _, id := range append(r.Parents, d.mu.added...) {
		parents[id] = struct{}{}
	}
	d.mu.parents, d.mu.added = parents, nil
	d.waiting.Store(r.Waiting)
	return nil
}

// Waiting is how many children wait on their parents, as last counted: at start, after
// notifications may have been missed, and at each re-check (every dependentsSweep while
// any parent has children to act on).
func (d *Dependents) Waiting() int64 { return d.waiting.Load() }

// pass acts on the children of the parents that finished, and, with sweep, reloads the
// parents and acts on every child that may act.
func (d *Dependents) pass(ctx context.Context, finished []int64, sweep bool) error {
	ctx, cancel := context.WithTimeout(ctx, dependentsTimeout)
	defer cancel()
	if sweep {
		if err := d.reload(ctx); err != nil {
			return err
		}
	}
	if len(finished) > 0 || sweep {
		slices.Sort(finished)
		finished = slices.Compact(finished)
		if err := d.store.settleChildren(ctx, opsqsql.DependentsDueParams{Parents: finished, Sweep: sweep}); err != nil {
			return err
		}
	}
	if sweep {
		return d.store.rearmChildren(ctx, opsqsql.DependentsRearmParams{Sweep: true})
	}
	return nil
}

// Sweep re-checks as the loop does every few seconds while it knows of parents with
// children: for tests, after a crash they stage.
func (d *Dependents) Sweep(ctx context.Context) error { return d.pass(ctx, nil, true) }
