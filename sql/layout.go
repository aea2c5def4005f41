package sql

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// onCitus is whether the database's tables are laid out by Citus (migration 00017). An
// opsq process serves one database, so it is the process's: DetectLayout sets it when an
// instance starts, and a test binary runs all its databases one way (pgtest.Citus).
var onCitus atomic.Bool

//go:embed layout_detect.sql
var layoutDetect string

// DetectLayout reads whether opsq's tables are Citus tables (layout_detect.sql) and, from
// then on, runs the statements that Citus cannot run as they are in the shape it can: on
// one PostgreSQL the engine sends the same statements as before. It returns the layout.
func DetectLayout(ctx context.Context, db DB) (citus bool, err error) {
	if err := db.QueryRow(ctx, layoutDetect).Scan(&citus); err != nil {
		return false, err
	}
	onCitus.Store(citus)
	return citus, nil
}

// OnCitus reports the layout DetectLayout read last.
func OnCitus() bool { return onCitus.Load() }

// Where Citus needs another shape of a statement, the method of that statement chooses it;
// each such pair is one statement's contract in two forms, tested on both layouts
// (make test, make test-citus). On one PostgreSQL the one-statement form stays: the
// per-row forms would cost it a statement per submission of a batch (TestHotPathStatements
// pins the count).

//go:embed submission_lock_one.sql
var submissionLockOne string

// submissionsLockCitus is SubmissionsLock on Citus: one router statement per id, in the
// order given (id order), in one round trip.
func (q Queries) submissionsLockCitus(ctx context.Context, ids []int64) ([]int64, error) {
	b := &pgx.Batch{}
	for _, id := range ids {
		b.Queue(submissionLockOne, pgx.NamedArgs{"id": id})
	}
	var locked []int64
	err := q.sendAll(ctx, b, func(rows pgx.Rows) error {
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		locked = append(locked, got...)
		return err
	})
	return locked, err
}

//go:embed chunks_complete_shard.sql
var chunksCompleteShardFile string

var chunksCompleteShard = statementsOf(chunksCompleteShardFile)

//go:embed completed_batch_insert.sql
var completedBatchInsert string

//go:embed submission_count_done.sql
var submissionCountDone string

//go:embed holds_release_completed.sql
var holdsReleaseCompleted string

// chunksCompleteCitus is ChunksComplete on Citus, where chunks_complete.sql's one
// statement over two co-location groups and the coordinator's holds would run as
// intermediate results sent to every shard. The same steps, each on one node: the chunks
// deleted per opsq shard and submission (router on the chunks' node, Citus's fast path;
// from chunks_waiting, in a round trip of its own, only those not found in chunks), then, in a second round trip, the
// outputs stored and the counts advanced per submission (router on the submission's node)
// and the holds released (the coordinator). The transaction spans the nodes; Citus
// commits it on all of them or none (two-phase commit).
func (q Queries) chunksCompleteCitus(ctx context.Context, p ChunksCompleteParams) ([]ChunksCompleteRow, error) {
	type key struct {
		sub int64
		idx int32
	}
	type group struct {
		shard int32
		sub   int64
	}
	input := map[key]int{} // → its index in p; the first of repeats
	byGroup := map[group][]int32{}
	for i := range p.SubmissionIDs {
		k := key{p.SubmissionIDs[i], p.ChunkIndexes[i]}
		if _, seen := input[k]; seen || !slices.Contains(p.Locked, k.sub) {
			continue
		}
		input[k] = i
		g := group{p.Shards[i], k.sub}
		byGroup[g] = append(byGroup[g], k.idx)
	}
	// The reservable chunks first; the waiting ones only for the keys not found there
	// (none in a workload whose chunks do not fail or pause): the submissions are locked,
	// so no chunk of theirs moves between the two (the promoter share-locks them).
	deleteFrom := func(stmt string, keys map[group][]int32) ([]int, error) {
		groups := slices.SortedFunc(maps.Keys(keys), func(a, b group) int {
			return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.sub, b.sub))
		})
		b := &pgx.Batch{}
		for _, g := range groups {
			b.Queue(stmt, pgx.NamedArgs{"shard": g.shard, "submission_id": g.sub, "chunk_indexes": keys[g]})
		}
		var done []int // indexes into p
		err := q.sendAll(ctx, b, func(rows pgx.Rows) error {
			var k key
			_, err := pgx.ForEachRow(rows, []any{&k.sub, &k.idx}, func() error {
				done = append(done, input[k])
				return nil
			})
			return err
		})
		return done, err
	}
	done, err := deleteFrom(chunksCompleteShard[0], byGroup)
	if err != nil {
		return nil, err
	}
	found := make(map[int]bool, len(done))
	for _, i := range done {
		found[i] = true
	}
	missing := map[group][]int32{}
	for g, idxs := range byGroup {
		for _, idx := range idxs {
			if !found[input[key{g.sub, idx}]] {
				missing[g] = append(missing[g], idx)
			}
		}
	}
	if len(missing) > 0 {
		waiting, err := deleteFrom(chunksCompleteShard[1], missing)
		if err != nil {
			return nil, err
		}
		done = append(done, waiting...)
	}

	// Per submission, in id order: its outputs, then its count.
	bySub := map[int64][]int{}
	for _, i := range done {
		bySub[p.SubmissionIDs[i]] = append(bySub[p.SubmissionIDs[i]], i)
	}
	subs := slices.Sorted(maps.Keys(bySub))
	b := &pgx.Batch{}
	var doneSids []int64
	var doneIdxs []int32
	for _, sub := range subs {
		ix := bySub[sub]
		slices.SortFunc(ix, func(a, b int) int { return int(p.ChunkIndexes[a] - p.ChunkIndexes[b]) })
		idxs := make([]int32, len(ix))
		outputs := make([][]byte, len(ix))
		for j, i := range ix {
			idxs[j], outputs[j] = p.ChunkIndexes[i], p.Outputs[i]
		}
		doneSids = append(doneSids, slices.Repeat([]int64{sub}, len(ix))...)
		doneIdxs = append(doneIdxs, idxs...)
		b.Queue(completedBatchInsert, pgx.NamedArgs{"submission_id": sub, "first_index": idxs[0], "chunk_indexes": idxs, "outputs": outputs})
		b.Queue(submissionCountDone, pgx.NamedArgs{"id": sub, "n": len(ix)})
	}
	b.Queue(holdsReleaseCompleted, pgx.NamedArgs{"tokens": p.Tokens, "submission_ids": doneSids, "chunk_indexes": doneIdxs})
	finished := map[int64]bool{}
	n := 0
	if err := q.sendAll(ctx, b, func(rows pgx.Rows) error {
		defer func() { n++ }()
		if n%2 == 0 || n/2 >= len(subs) { // an insert, or the holds' delete
			rows.Close()
			return rows.Err()
		}
		var f bool
		_, err := pgx.ForEachRow(rows, []any{&f}, func() error {
			finished[subs[n/2]] = f
			return nil
		})
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]ChunksCompleteRow, 0, len(done))
	for _, i := range done {
		out = append(out, ChunksCompleteRow{SubmissionID: p.SubmissionIDs[i], ChunkIndex: p.ChunkIndexes[i],
			Shard: int(p.Shards[i]), SubmissionFinished: finished[p.SubmissionIDs[i]]})
	}
	return out, nil
}

// sendAll sends b and hands each statement's rows to read, in order.
func (q Queries) sendAll(ctx context.Context, b *pgx.Batch, read func(pgx.Rows) error) error {
	res := q.db.SendBatch(ctx, b)
	defer res.Close()
	for range b.Len() {
		rows, err := res.Query()
		if err != nil {
			return err
		}
		if err := read(rows); err != nil {
			return err
		}
	}
	return res.Close()
}

//go:embed submission_finish_one.sql
var submissionFinishOne string

// submissionsFinishCitus is SubmissionsFinishCompleted on Citus: for each id, the three
// router statements of submission_finish_one.sql, all in one round trip.
func (q Queries) submissionsFinishCitus(ctx context.Context, ids []int64) error {
	stmts := statementsOf(submissionFinishOne)
	b := &pgx.Batch{}
	for _, id := range ids {
		for _, s := range stmts {
			b.Queue(s, pgx.NamedArgs{"id": id})
		}
	}
	return q.sendAll(ctx, b, func(rows pgx.Rows) error {
		rows.Close()
		return rows.Err()
	})
}

//go:embed chunks_promote_due.sql
var chunksPromoteDue string

//go:embed submission_share_unpaused.sql
var submissionShareUnpaused string

//go:embed chunks_promote_shard.sql
var chunksPromoteShard string

// chunksPromoteCitus is ChunksPromote on Citus, where chunks_promote.sql's multi-shard
// FOR UPDATE … SKIP LOCKED is refused: the due chunks read over p.Shards, their
// submissions share-locked one by one (skipped when paused or being paused), then the
// chunks of the unpaused ones moved per shard. It must run in a transaction, for the
// share locks to hold until the moves commit; ChunksPromote's callers run it in one.
func (q Queries) chunksPromoteCitus(ctx context.Context, p ChunksPromoteParams) ([]int, error) {
	type due struct {
		shard int32
		sub   int64
		idx   int32
	}
	if len(p.Shards) == 0 {
		return nil, nil
	}
	rows, err := q.db.Query(ctx, chunksPromoteDue, pgx.NamedArgs{"limit": p.Limit, "shards": p.Shards})
	if err != nil {
		return nil, err
	}
	var all []due
	var d due
	if _, err := pgx.ForEachRow(rows, []any{&d.shard, &d.sub, &d.idx}, func() error {
		all = append(all, d)
		return nil
	}); err != nil || len(all) == 0 {
		return nil, err
	}
	var subs []int64
	for _, d := range all {
		subs = append(subs, d.sub)
	}
	slices.Sort(subs)
	subs = slices.Compact(subs)
	b := &pgx.Batch{}
	for _, id := range subs {
		b.Queue(submissionShareUnpaused, pgx.NamedArgs{"id": id})
	}
	unpaused := map[int64]bool{}
	if err := q.sendAll(ctx, b, func(rows pgx.Rows) error {
		var id int64
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			unpaused[id] = true
			return nil
		})
		return err
	}); err != nil {
		return nil, err
	}
	byShard := map[int32][]due{}
	for _, d := range all {
		if unpaused[d.sub] {
			byShard[d.shard] = append(byShard[d.shard], d)
		}
	}
	b = &pgx.Batch{}
	for s, ds := range byShard {
		sids, idxs := make([]int64, len(ds)), make([]int32, len(ds))
		for i, d := range ds {
			sids[i], idxs[i] = d.sub, d.idx
		}
		b.Queue(chunksPromoteShard, pgx.NamedArgs{"shard": s, "submission_ids": sids, "chunk_indexes": idxs})
	}
	var shards []int
	err = q.sendAll(ctx, b, func(rows pgx.Rows) error {
		var s int
		_, err := pgx.ForEachRow(rows, []any{&s}, func() error {
			shards = append(shards, s)
			return nil
		})
		return err
	})
	return shards, err
}

//go:embed chunk_state_shard.sql
var chunkStateShard string

//go:embed chunk_state_submission.sql
var chunkStateSubmission string

// chunkStatesCitus is ChunkState for each of chunks on Citus, where chunk_state.sql's and
// chunk_states.sql's joins of the chunks with their submissions cross the co-location
// groups ("requires repartitioning"): per chunk, the router statement on its shard's node
// and the one on its submission's node, all in one round trip. found false: nobody knows
// the chunk.
func (q Queries) chunkStatesCitus(ctx context.Context, chunks []Chunk) (rows []ChunkStateRow, found []bool, err error) {
	b := &pgx.Batch{}
	for _, c := range chunks {
		args := pgx.NamedArgs{"shard": c.Shard, "submission_id": c.SubmissionID, "chunk_index": c.ChunkIndex}
		b.Queue(chunkStateShard, args)
		b.Queue(chunkStateSubmission, args)
	}
	rows, found = make([]ChunkStateRow, len(chunks)), make([]bool, len(chunks))
	var here []bool // per chunk: in chunks or chunks_waiting
	n := 0
	err = q.sendAll(ctx, b, func(rs pgx.Rows) error {
		defer func() { n++ }()
		i := n / 2
		if n%2 == 0 {
			var r ChunkStateRow
			got := false
			if _, err := pgx.ForEachRow(rs, []any{&r.Retries, &r.AttemptBase}, func() error {
				got = true
				return nil
			}); err != nil {
				return err
			}
			rows[i] = r
			here = append(here, got)
			return nil
		}
		var kind string
		var maxRetries int32
		var counted bool
		inProgress, finished := false, false
		if _, err := pgx.ForEachRow(rs, []any{&kind, &maxRetries, &counted}, func() error {
			switch {
			case kind == "in_progress":
				inProgress = true
				rows[i].MaxRetries = maxRetries
				finished = finished || counted
			default:
				finished = true
			}
			return nil
		}); err != nil {
			return err
		}
		switch {
		case here[i] && inProgress:
			rows[i].State, found[i] = "pending", true
		case finished:
			rows[i], found[i] = ChunkStateRow{State: "finished"}, true
		}
		return nil
	})
	return rows, found, err
}

//go:embed chunk_retry_citus.sql
var chunkRetryCitus string

// chunkRetryCitus is ChunkRetry on Citus: chunk_retry.sql's steps as opsq.chunk_retry_steps
// runs them (migration 00019), then its NOTIFYs, from the coordinator's session as every
// NOTIFY is.
func (q Queries) chunkRetryCitus(ctx context.Context, p ChunkRetryParams, args pgx.NamedArgs) (ChunkRetried, error) {
	r, err := collectOne[struct {
		FenceHeld bool   `db:"fence_held"`
		Retries   *int32 `db:"retries"`
		Waits     bool   `db:"waits"`
	}](ctx, q.db, chunkRetryCitus, args)
	if err != nil {
		return ChunkRetried{}, err
	}
	if !r.FenceHeld {
		return ChunkRetried{}, &FenceError{Shard: p.Shard, Generation: p.Fence.Generation}
	}
	if r.Retries == nil {
		return ChunkRetried{}, nil
	}
	notices := []Notice{p.Released}
	if !r.Waits {
		notices = append(notices, p.Work) // a chunk that waits is announced when it is due
	}
	for _, n := range notices {
		if n.Channel == "" {
			continue
		}
		if err := q.Notify(ctx, NotifyParams{Channel: n.Channel, Payload: n.Payload}); err != nil {
			return ChunkRetried{}, err
		}
	}
	return ChunkRetried{Retried: true, Waits: r.Waits}, nil
}

// chunkFailCitus is chunk_fail.sql on Citus: its steps as opsq.chunk_fail_steps runs them
// (migration 00020), with the same row back; ChunkFail reads it.
//
//go:embed chunk_fail_citus.sql
var chunkFailCitus string

// statementsOf splits a file of several statements at its "-- next statement" lines.
func statementsOf(file string) []string {
	return strings.Split(file, "\n-- next statement\n")
}

//go:embed submission_lock_any_citus.sql
var submissionLockAnyCitus string

//go:embed submission_ended_lock_citus.sql
var submissionEndedLockCitus string

// lockFirstCitus sends each statement of file with args in one round trip, each locking at
// most one row, and returns the first row found, scanned into dest; false when none was.
func (q Queries) lockFirstCitus(ctx context.Context, file string, args pgx.NamedArgs, dest ...any) (bool, error) {
	b := &pgx.Batch{}
	for _, s := range statementsOf(file) {
		b.Queue(s, args)
	}
	found := false
	err := q.sendAll(ctx, b, func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			if found {
				continue
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			found = true
		}
		return rows.Err()
	})
	return found, err
}

//go:embed tenant_submissions_citus.sql
var tenantSubmissionsCitus string

// tenantSubmissionsCitus is TenantSubmissions on Citus: each tenant's first page, read in
// one round trip, merged in id order.
func (q Queries) tenantSubmissionsCitus(ctx context.Context, p TenantSubmissionsParams) ([]TenantSubmissionsRow, error) {
	b := &pgx.Batch{}
	for _, t := range p.Tenants {
		b.Queue(tenantSubmissionsCitus, pgx.NamedArgs{"tenant": t, "limit": p.Limit})
	}
	var out []TenantSubmissionsRow
	err := q.sendAll(ctx, b, func(rows pgx.Rows) error {
		got, err := pgx.CollectRows(rows, pgx.RowToStructByName[TenantSubmissionsRow])
		out = append(out, got...)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b TenantSubmissionsRow) int { return cmp.Compare(a.ID, b.ID) })
	return out[:min(len(out), p.Limit)], nil
}

//go:embed holds_collect_citus.sql
var holdsCollectCitus string

// holdsCollectCitus is HoldsCollect on Citus: the two statements of holds_collect_citus.sql.
func (q Queries) holdsCollectCitus(ctx context.Context) error {
	stmts := statementsOf(holdsCollectCitus)
	rows, err := q.db.Query(ctx, stmts[0])
	if err != nil {
		return err
	}
	inProgress, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return err
	}
	if inProgress == nil {
		inProgress = []int64{} // none in progress: every hold goes (NULL would keep them)
	}
	_, err = q.db.Exec(ctx, stmts[1], pgx.NamedArgs{"in_progress": inProgress})
	return err
}

//go:embed dependent_retry_citus.sql
var dependentRetryCitus string

// dependentRetryCitus is DependentRetry on Citus: dependent_retry_citus.sql's steps, each
// on one side of the coordinator's boundary, the ids and states passed as arrays.
func (q Queries) dependentRetryCitus(ctx context.Context, id int64) (DependentRetryRow, error) {
	steps := statementsOf(dependentRetryCitus)
	var parents []int64
	if err := q.db.QueryRow(ctx, steps[0], pgx.NamedArgs{"id": id}).Scan(&parents); err != nil {
		return DependentRetryRow{}, err
	}
	states := []string{}
	if len(parents) > 0 {
		if err := q.db.QueryRow(ctx, steps[1], pgx.NamedArgs{"parents": parents}).Scan(&states); err != nil {
			return DependentRetryRow{}, err
		}
	}
	return collectOne[DependentRetryRow](ctx, q.db, steps[2], pgx.NamedArgs{"id": id, "parents": parents, "states": states})
}

//go:embed dependent_start_citus.sql
var dependentStartCitus string

// dependentStartCitus is DependentStart's statement on Citus (dependent_start_citus.sql):
// pgx.ErrNoRows when the child was not waiting, nil when it is no longer in progress.
func (q Queries) dependentStartCitus(ctx context.Context, id int64) (*int64, error) {
	steps := statementsOf(dependentStartCitus)
	args := pgx.NamedArgs{"id": id}
	var child int64
	if err := q.db.QueryRow(ctx, steps[0], args).Scan(&child); err != nil {
		return nil, err
	}
	var total int64
	err := q.db.QueryRow(ctx, steps[1], args).Scan(&total)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &total, err
}

//go:embed dependents_due_citus.sql
var dependentsDueCitus string

// dependentsDueCitus is DependentsDue on Citus (dependents_due_citus.sql): the waiting
// children and their parents read on the coordinator, then decided from their states.
func (q Queries) dependentsDueCitus(ctx context.Context, p DependentsDueParams) ([]DependentsDueRow, error) {
	steps := statementsOf(dependentsDueCitus)
	var w struct {
		children, parents []*int64
		policies          []string
		positions         []*int32
	}
	err := q.db.QueryRow(ctx, steps[0], pgx.NamedArgs{
		"parents": nonNilOf(p.Parents), "children": nonNilOf(p.Children), "sweep": p.Sweep,
	}).Scan(&w.children, &w.policies, &w.parents, &w.positions)
	if err != nil || len(w.children) == 0 {
		return nil, err
	}
	return collect[DependentsDueRow](ctx, q.db, steps[1], pgx.NamedArgs{
		"children": w.children, "policies": w.policies, "parents": w.parents, "positions": w.positions, "limit": p.Limit,
	})
}
