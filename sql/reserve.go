package sql

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
	Row          RowAddr
}

// RowAddr is where a chunk's row was when a candidate query read it: its ctid, the block
// and the line pointer of the row version, packed as block<<16 | line; 0 for none (line
// pointers start at 1). The complete statement deletes a chunk it is given the address of
// by that address, checked against the chunk's key (a TID scan: no descent of the primary
// key), and any other by its key (chunks_complete.sql). An address is a hint, never an
// identity: an update of the row (a retry), VACUUM FULL or a repack moves it, and another
// chunk's row may come to stand there, which the key check refuses.
type RowAddr uint64

// ScanTID reads a ctid (pgtype.TIDScanner); NULL is 0.
func (a *RowAddr) ScanTID(v pgtype.TID) error {
	*a = 0
	if v.Valid {
		*a = RowAddr(v.BlockNumber)<<16 | RowAddr(v.OffsetNumber)
	}
	return nil
}

// TIDValue writes a as a ctid (pgtype.TIDValuer); 0 is NULL.
func (a RowAddr) TIDValue() (pgtype.TID, error) {
	if a == 0 {
		return pgtype.TID{}, nil
	}
	return pgtype.TID{BlockNumber: uint32(a >> 16), OffsetNumber: uint16(a), Valid: true}, nil
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
	if OnCitus() && strings.HasPrefix(p.Query, customPriorityCitusPrefix) {
		if err := q.candidatesCustomPriorityCitus(ctx, p, fn); err != nil {
			return fmt.Errorf("reading candidates: %w", err)
		}
		return nil
	}
	rows, err := q.db.Query(ctx, p.Query, p.Args)
	if err != nil {
		return fmt.Errorf("reading candidates: %w", err)
	}
	var r CandidatesStreamRow
	_, err = pgx.ForEachRow(rows, []any{&r.SubmissionID, &r.ChunkIndex, &r.Shard, &r.Retries, &r.AttemptBase, &r.Input, &r.RandomOrder, &r.NegPriority, &r.Row}, func() error {
		return fn(r)
	})
	if err != nil {
		return fmt.Errorf("reading candidates: %w", err)
	}
	return nil
}

// customPriorityCitusPrefix begins the first step of candidates_custom_priority_citus.sql,
// and no other candidate query.
var customPriorityCitusPrefix = customPriorityCitus[0][:strings.Index(customPriorityCitus[0], "ARRAY[")+len("ARRAY[")]

// candidatesCustomPriorityCitus runs the steps of candidates_custom_priority_citus.sql: the
// submissions in priority order (p.Query, a page of @limit at a time), then each one's
// chunks on the instance's shards in chunk order, until p.Args' @limit chunks went to fn
// or no submission is left. The rows and their order are
// those of candidates_custom_priority.sql on one PostgreSQL.
func (q Queries) candidatesCustomPriorityCitus(ctx context.Context, p CandidatesStreamParams, fn func(CandidatesStreamRow) error) error {
	limit, ok1 := asInt64(p.Args["limit"])
	afterSub, ok2 := asInt64(p.Args["after_submission"])
	afterChunk, ok3 := asInt64(p.Args["after_chunk"])
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("custom_priority on Citus: @limit, @after_submission and @after_chunk must be integers, got %T, %T, %T",
			p.Args["limit"], p.Args["after_submission"], p.Args["after_chunk"])
	}
	type submission struct {
		id, negPriority int64
		shards          []int32
	}
	// The submissions in pages of @limit, each after the last of the one before, as the one
	// statement's outer scan goes on until @limit chunks came (submissions with no chunk on
	// these shards give none).
	args := maps.Clone(p.Args)
	sent := int64(0)
	for {
		rows, err := q.db.Query(ctx, p.Query, args)
		if err != nil {
			return err
		}
		var s submission
		var subs []submission
		if _, err := pgx.ForEachRow(rows, []any{&s.id, &s.negPriority, &s.shards}, func() error {
			subs = append(subs, s)
			return nil
		}); err != nil {
			return err
		}
		for _, s := range subs {
			after := int64(-1)
			if s.id == afterSub {
				after = afterChunk
			}
			rows, err := q.db.Query(ctx, customPriorityCitus[1], pgx.NamedArgs{
				"id": s.id, "neg_priority": s.negPriority, "shards": s.shards, "after_chunk": after, "limit": limit - sent})
			if err != nil {
				return err
			}
			var r CandidatesStreamRow
			if _, err := pgx.ForEachRow(rows, []any{&r.SubmissionID, &r.ChunkIndex, &r.Shard, &r.Retries, &r.AttemptBase, &r.Input, &r.RandomOrder, &r.NegPriority, &r.Row}, func() error {
				sent++
				return fn(r)
			}); err != nil {
				return err
			}
			if sent >= limit {
				return nil
			}
		}
		if int64(len(subs)) < limit {
			return nil // no submission left
		}
		last := subs[len(subs)-1]
		args["after_priority"], args["after_submission"] = last.negPriority, last.id+1 // past it
	}
}

// asInt64 is v as an int64, if v is a Go integer.
func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}
