package sql

import (
	"context"
	_ "embed"
	"errors"

	"github.com/jackc/pgx/v5"
)

// The statements of submissions after other submissions (issue 32, migrations/00022):
// the children, their parents, and the transitions of a child that waits on them.

//go:embed dependencies_check.sql
var dependenciesCheck string

// DependenciesCheckParams are dependencies_check.sql's.
type DependenciesCheckParams struct {
	Parents []int64
	Tenant  string
}

// DependenciesCheckRow is one parent of a new child: its place in after and its state, nil
// when it is no submission of the child's tenant.
type DependenciesCheckRow struct {
	Position int32   `db:"position"`
	State    *string `db:"state"`
}

// DependenciesCheck reads the state of each parent of a new child, in order.
func (q Queries) DependenciesCheck(ctx context.Context, p DependenciesCheckParams) ([]DependenciesCheckRow, error) {
	return collect[DependenciesCheckRow](ctx, q.db, dependenciesCheck, pgx.NamedArgs{"parents": p.Parents, "tenant": p.Tenant})
}

//go:embed dependencies_insert.sql
var dependenciesInsert string

// DependenciesInsertParams are dependencies_insert.sql's.
type DependenciesInsertParams struct {
	Child   int64
	Parents []int64
	// Policy is "completed" or "finished".
	Policy string
	// Waiting: the child's chunks were inserted held, waiting on its parents.
	Waiting bool
}

// DependenciesInsert records a new child's policy and parents.
func (q Queries) DependenciesInsert(ctx context.Context, p DependenciesInsertParams) error {
	_, err := q.db.Exec(ctx, dependenciesInsert, pgx.NamedArgs{
		"child": p.Child, "parents": p.Parents, "policy": p.Policy, "waiting": p.Waiting,
	})
	return err
}

//go:embed dependents_due.sql
var dependentsDue string

// DependentsDueParams are dependents_due.sql's.
type DependentsDueParams struct {
	// Parents: look at their children. Children: look at these. Sweep: look at every
	// waiting child.
	Parents  []int64
	Children []int64
	Sweep    bool
	Limit    int
}

// DependentsDueRow is a waiting child that may act: start (BlockedBy nil), or be cancelled
// because of parent BlockedBy, in state BlockedState.
type DependentsDueRow struct {
	ID           int64   `db:"id"`
	BlockedBy    *int64  `db:"blocked_by"`
	BlockedState *string `db:"blocked_state"`
}

// DependentsDue reads the waiting children that may start or must be cancelled now.
func (q Queries) DependentsDue(ctx context.Context, p DependentsDueParams) ([]DependentsDueRow, error) {
	if OnCitus() {
		return q.dependentsDueCitus(ctx, p)
	}
	return collect[DependentsDueRow](ctx, q.db, dependentsDue, pgx.NamedArgs{
		"parents": nonNilOf(p.Parents), "children": nonNilOf(p.Children), "sweep": p.Sweep, "limit": p.Limit,
	})
}

//go:embed dependent_start.sql
var dependentStart string

// DependentStart marks a waiting child as waiting no more, before its chunks move in, and
// returns its chunks_total; started false when it was not waiting.
func (q Queries) DependentStart(ctx context.Context, id int64) (started bool, chunksTotal int64, err error) {
	var total *int64
	if OnCitus() {
		total, err = q.dependentStartCitus(ctx, id)
	} else {
		err = q.db.QueryRow(ctx, dependentStart, pgx.NamedArgs{"id": id}).Scan(&total)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return false, 0, nil
	}
	if err != nil || total == nil {
		return false, 0, err
	}
	return true, *total, nil
}

//go:embed dependent_cancel.sql
var dependentCancel string

// DependentCancelParams are dependent_cancel.sql's.
type DependentCancelParams struct {
	ID      int64
	Parent  int64
	Failure string
}

// DependentCancel marks a waiting child as cancelled by a parent, before its cancel; false
// when it was not waiting.
func (q Queries) DependentCancel(ctx context.Context, p DependentCancelParams) (bool, error) {
	return returnsRow(q.db.QueryRow(ctx, dependentCancel, pgx.NamedArgs{"id": p.ID, "parent": p.Parent, "failure": p.Failure}))
}

//go:embed dependents_rearm.sql
var dependentsRearm string

// DependentsRearmParams are dependents_rearm.sql's.
type DependentsRearmParams struct {
	Parents []int64
	Sweep   bool
	Limit   int
}

// DependentsRearmRow is a child cancelled by a parent that was retried.
type DependentsRearmRow struct {
	ID          int64 `db:"id"`
	CancelledBy int64 `db:"cancelled_by"`
}

// DependentsRearm reads the children that a retry of their parent marked to re-arm.
func (q Queries) DependentsRearm(ctx context.Context, p DependentsRearmParams) ([]DependentsRearmRow, error) {
	return collect[DependentsRearmRow](ctx, q.db, dependentsRearm, pgx.NamedArgs{
		"parents": nonNilOf(p.Parents), "sweep": p.Sweep, "limit": p.Limit,
	})
}

//go:embed dependents_rearm_mark.sql
var dependentsRearmMark string

// DependentsRearmMark, in a retry of parent, marks the children it cancelled to re-arm;
// it reports whether there was any.
func (q Queries) DependentsRearmMark(ctx context.Context, parent int64) (bool, error) {
	var any bool
	err := q.db.QueryRow(ctx, dependentsRearmMark, pgx.NamedArgs{"parent": parent}).Scan(&any)
	return any, err
}

//go:embed dependents_parents.sql
var dependentsParents string

// DependentsParentsRow is the parents that have children to act on, and how many children
// wait on parents.
type DependentsParentsRow struct {
	Parents []int64 `db:"parents"`
	Waiting int64   `db:"waiting"`
}

// DependentsParents reads the parents that have children to act on.
func (q Queries) DependentsParents(ctx context.Context) (DependentsParentsRow, error) {
	return collectOne[DependentsParentsRow](ctx, q.db, dependentsParents, nil)
}

//go:embed dependent_retry.sql
var dependentRetry string

// DependentRetryRow is a retried child: whether it waits on its parents again, and its
// parents.
type DependentRetryRow struct {
	Waiting bool    `db:"waiting"`
	Parents []int64 `db:"parents"`
}

// DependentRetry, in a retry of submission id, makes it wait on its parents again when
// they do not let it start; ErrNotFound for a submission that is no child.
func (q Queries) DependentRetry(ctx context.Context, id int64) (DependentRetryRow, error) {
	if OnCitus() {
		return q.dependentRetryCitus(ctx, id)
	}
	return collectOne[DependentRetryRow](ctx, q.db, dependentRetry, pgx.NamedArgs{"id": id})
}

//go:embed dependencies_status.sql
var dependenciesStatus string

// DependenciesStatusRow is what a child's status adds.
type DependenciesStatusRow struct {
	Policy    string  `db:"policy"`
	Failure   *string `db:"failure"`
	After     []int64 `db:"after"`
	WaitingOn []int64 `db:"waiting_on"`
}

// DependenciesStatus reads a child's policy, parents and the parents it waits on;
// ErrNotFound for a submission that is no child.
func (q Queries) DependenciesStatus(ctx context.Context, id int64) (DependenciesStatusRow, error) {
	return collectOne[DependenciesStatusRow](ctx, q.db, dependenciesStatus, pgx.NamedArgs{"id": id})
}

// returnsRow reports whether a statement that returns at most one row returned one.
func returnsRow(row pgx.Row) (bool, error) {
	var id int64
	err := row.Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}
