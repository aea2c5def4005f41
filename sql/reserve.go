package sql

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Reserving: the candidate queries, which package strategy compiles (strategy.CandidateQuery,
// strategy.SubmissionQuery). The other statements of reserving, completing and failing
// chunks are in chunks.go, submissions.go and cluster.go.

// CandidatesStreamParams are a candidate query as package strategy compiles it
// (strategy.CandidateQuery, strategy.SubmissionQuery): its text and its arguments, the
// leaf's filters and shards with the caller's keyset arguments (@limit, @after_…).
type CandidatesStreamParams struct {
	Query string
	Args  pgx.NamedArgs
	// Local, on a Citus worker (an instance's home, handout.Config.ScanNode), runs the
	// query in a read-only transaction block: Citus then reads the shards placed on that
	// worker in the session itself (local execution), where outside a block it opens a
	// connection to the worker itself per shard, a backend and a plan each (Citus's
	// ShouldExecuteTasksLocally). Needs a pool, not a transaction.
	Local bool
}

// CandidatesStreamRow is a candidate chunk, as every candidate query returns it.
type CandidatesStreamRow struct {
	SubmissionID int64
	ChunkIndex   int32
	Shard        int
	Retries      int32
	AttemptBase  int32  // its attempt, the one its token names, is AttemptBase + Retries
	Input        []byte // the row's own: fn may keep it
	RandomOrder  int
	NegPriority  int64 // the negated priority of its submission (custom_priority)
}

// CandidatesStream runs a candidate query and calls fn with each of its rows, in the
// query's order, as they stream from the database. Its errors, fn's included, read
// "reading candidates: …". The queuer runs it on its candidate pool, whose connections
// plan these queries (ConfigureCandidateSession).
func (q Queries) CandidatesStream(ctx context.Context, p CandidatesStreamParams, fn func(CandidatesStreamRow) error) error {
	if p.Local {
		pool, ok := q.db.(interface {
			BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
		})
		if !ok {
			return fmt.Errorf("reading candidates: Local needs a pool, not a %T", q.db)
		}
		tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("reading candidates: %w", err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) // read only: nothing to commit
		p.Local = false
		return Queries{db: tx}.CandidatesStream(ctx, p, fn)
	}
	rows, err := q.db.Query(ctx, p.Query, p.Args)
	if err != nil {
		return fmt.Errorf("reading candidates: %w", err)
	}
	var r CandidatesStreamRow
	_, err = pgx.ForEachRow(rows, []any{&r.SubmissionID, &r.ChunkIndex, &r.Shard, &r.Retries, &r.AttemptBase, &r.Input, &r.RandomOrder, &r.NegPriority}, func() error {
		return fn(r)
	})
	if err != nil {
		return fmt.Errorf("reading candidates: %w", err)
	}
	return nil
}
