package sql

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Chunk names one chunk: its shard and its key.
type Chunk struct {
	Shard        int
	SubmissionID int64
	ChunkIndex   int32
}

// Fence is the claim a write is made under: it happens only while the shard is at
// Generation, held by Claimant when it is set, and is refused with a *FenceError
// otherwise.
type Fence struct {
	Claimant   string // "": any
	Generation int64
}

// args returns the fence's arguments: NULLs for no fence.
func (f *Fence) args(a pgx.NamedArgs) {
	a["claimant"], a["generation"] = nil, nil
	if f != nil {
		a["generation"] = f.Generation
		if f.Claimant != "" {
			a["claimant"] = f.Claimant
		}
	}
}

//go:embed chunk_retry.sql
var chunkRetry string

// ChunkRetryParams are chunk_retry.sql's.
type ChunkRetryParams struct {
	Chunk
	// Retries is the attempt the token names (tokens.Token.Retries: the chunk's
	// attempt_base + retries when it was handed out): the write happens only while the
	// chunk is at that attempt.
	Retries int32
	Fence   *Fence
	// Error and Consumer are the failed attempt's, recorded in chunk_errors.
	Error    string
	Consumer string
	// Delay, if set, is how long the chunk waits before it is reservable again, instead of
	// its submission's backoff (a fail's retry_after).
	Delay *time.Duration
	// Token is the reservation's: its max_simultaneous slots are freed.
	Token string
	// Released and Work are the NOTIFYs of a retry, sent at commit: Released to the
	// instance holding the reservation (none: zero), Work of the chunk reservable again
	// (sent unless the chunk waits).
	Released, Work Notice
}

// Notice is a NOTIFY's channel and payload; the zero Notice is none.
type Notice struct {
	Channel, Payload string
}

// args puts the notice's channel and payload in a as name_channel and name_payload: NULLs
// for none.
func (n Notice) args(a pgx.NamedArgs, name string) {
	a[name+"_channel"], a[name+"_payload"] = nil, nil
	if n.Channel != "" {
		a[name+"_channel"], a[name+"_payload"] = n.Channel, n.Payload
	}
}

// chunkRetryRow is chunk_retry.sql's row.
type chunkRetryRow struct {
	FenceHeld        bool   `db:"fence_held"`
	Retries          *int32 `db:"retries"`
	Waits            bool   `db:"waits"`
	ReleasedNotified bool   `db:"released_notified"`
	WorkNotified     bool   `db:"work_notified"`
}

// ChunkRetried is what ChunkRetry did: Retried, the attempt was counted; Waits, the chunk
// waits (its backoff, or its submission is paused) in chunks_waiting instead of being
// reservable at once.
type ChunkRetried struct {
	Retried, Waits bool
}

// ChunkRetry counts one failed attempt at a chunk and makes it reservable again, at once
// or after its wait, frees its reservation's max_simultaneous slots and sends p's NOTIFYs,
// in one statement (one round trip, in the completer's transaction of the moment, after
// PlanByKey). Retried is false when it counted nothing (the chunk is gone, the attempt was
// counted already, or its attempts are spent); a *FenceError when p.Fence refused.
func (q Queries) ChunkRetry(ctx context.Context, p ChunkRetryParams) (ChunkRetried, error) {
	args := pgx.NamedArgs{"shard": p.Shard, "submission_id": p.SubmissionID, "chunk_index": p.ChunkIndex, "attempt": p.Retries,
		"error": p.Error, "consumer": p.Consumer, "delay_ms": nil, "token": p.Token}
	if p.Delay != nil {
		args["delay_ms"] = p.Delay.Milliseconds()
	}
	p.Fence.args(args)
	if OnCitus() {
		return q.chunkRetryCitus(ctx, p, args)
	}
	p.Released.args(args, "released")
	p.Work.args(args, "work")
	r, err := collectOne[chunkRetryRow](ctx, q.db, chunkRetry, args)
	if err != nil {
		return ChunkRetried{}, err
	}
	if !r.FenceHeld {
		return ChunkRetried{}, &FenceError{Shard: p.Shard, Generation: p.Fence.Generation}
	}
	return ChunkRetried{Retried: r.Retries != nil, Waits: r.Waits}, nil
}

//go:embed chunk_fail.sql
var chunkFail string

// ChunkFailParams are chunk_fail.sql's.
type ChunkFailParams struct {
	Chunk
	Retries  int32 // as in ChunkRetryParams
	Error    string
	Consumer string
	Fence    *Fence
	// SkipNow is the most chunks pending (this one included) whose submission, when this
	// fail fails it, has them all skipped in the fail's statement; with more, they are
	// left for ChunksSkipRange (ChunkFailed.Sliced). 0: no bound.
	SkipNow int64
}

// chunkFailRow is chunk_fail.sql's row.
type chunkFailRow struct {
	FenceHeld    bool   `db:"fence_held"`
	SubmissionID *int64 `db:"submission_id"`
	Finished     bool   `db:"finished"`
	Dropped      bool   `db:"dropped"`
	Sliced       bool   `db:"sliced"`
	ChunksTotal  *int64 `db:"chunks_total"`
}

// ChunkFailed is what ChunkFail did: Failed, the chunk failed; Finished, its submission
// is finished (failed) with it; Dropped, its failure policy failed it, and its other
// chunks are skipped; Sliced, they are not moved yet, but left for ChunksSkipRange, over
// the submission's ChunksTotal chunk indexes.
type ChunkFailed struct {
	Failed, Finished, Dropped, Sliced bool
	ChunksTotal                       int64
}

// ChunkFail fails a chunk for good; its submission's failure policy decides the rest
// (chunk_fail.sql). Failed is false when it did nothing (the chunk is gone or the attempt
// is over); a *FenceError when p.Fence refused.
func (q Queries) ChunkFail(ctx context.Context, p ChunkFailParams) (ChunkFailed, error) {
	skipNow := p.SkipNow
	if skipNow <= 0 {
		skipNow = math.MaxInt64
	}
	args := pgx.NamedArgs{"shard": p.Shard, "submission_id": p.SubmissionID, "chunk_index": p.ChunkIndex, "attempt": p.Retries,
		"error": p.Error, "consumer": p.Consumer, "skip_now": skipNow}
	p.Fence.args(args)
	statement := chunkFail
	if OnCitus() {
		statement = chunkFailCitus
	}
	r, err := collectOne[chunkFailRow](ctx, q.db, statement, args)
	if err != nil {
		return ChunkFailed{}, err
	}
	if !r.FenceHeld {
		return ChunkFailed{}, &FenceError{Shard: p.Shard, Generation: p.Fence.Generation}
	}
	did := ChunkFailed{Failed: r.SubmissionID != nil, Finished: r.Finished, Dropped: r.Dropped, Sliced: r.Sliced}
	if r.ChunksTotal != nil {
		did.ChunksTotal = *r.ChunksTotal
	}
	return did, nil
}

//go:embed chunk_state.sql
var chunkState string

// ChunkStateParams are chunk_state.sql's.
type ChunkStateParams struct {
	Chunk
}

// ChunkStateRow is where a chunk is: State "pending" (reservable, with its Retries, its
// submission's MaxRetries and its AttemptBase: the chunk is at attempt AttemptBase +
// Retries, the one its latest token names) or "finished" (completed, failed, or its
// submission is finished).
type ChunkStateRow struct {
	State       string `db:"state"`
	Retries     int32  `db:"retries"`
	MaxRetries  int32  `db:"max_retries"`
	AttemptBase int32  `db:"attempt_base"`
}

// ChunkState reads where a chunk is; ErrNotFound when nobody knows it.
func (q Queries) ChunkState(ctx context.Context, p ChunkStateParams) (ChunkStateRow, error) {
	if OnCitus() {
		rows, found, err := q.chunkStatesCitus(ctx, []Chunk{p.Chunk})
		if err != nil {
			return ChunkStateRow{}, err
		}
		if !found[0] {
			return ChunkStateRow{}, ErrNotFound
		}
		return rows[0], nil
	}
	return collectOne[ChunkStateRow](ctx, q.db, chunkState, pgx.NamedArgs{
		"shard": p.Shard, "submission_id": p.SubmissionID, "chunk_index": p.ChunkIndex,
	})
}

//go:embed chunk_attempt_error.sql
var chunkAttemptError string

// ChunkAttemptErrorParams are chunk_attempt_error.sql's.
type ChunkAttemptErrorParams struct {
	Chunk
	Back int // 0: the latest failed attempt, 1: the one before, …
}

// ChunkAttemptError reads the error recorded for one of a chunk's last failed attempts;
// ErrNotFound when none is recorded that far back.
func (q Queries) ChunkAttemptError(ctx context.Context, p ChunkAttemptErrorParams) (string, error) {
	r, err := collectOne[chunkAttemptErrorRow](ctx, q.db, chunkAttemptError, pgx.NamedArgs{
		"submission_id": p.SubmissionID, "chunk_index": p.ChunkIndex, "back": p.Back,
	})
	return r.Error, err
}

// chunkAttemptErrorRow is chunk_attempt_error.sql's row.
type chunkAttemptErrorRow struct {
	Error string `db:"error"`
}

//go:embed chunk_states.sql
var chunkStates string

// ChunkStatesParams are chunk_states.sql's.
type ChunkStatesParams struct {
	Chunks []Chunk
}

// ChunkStates tells, in one statement, which of p.Chunks opsq knows (pending or
// finished), in the order of p.Chunks.
func (q Queries) ChunkStates(ctx context.Context, p ChunkStatesParams) ([]bool, error) {
	shards := make([]int32, len(p.Chunks))
	sids := make([]int64, len(p.Chunks))
	idxs := make([]int32, len(p.Chunks))
	for i, c := range p.Chunks {
		shards[i], sids[i], idxs[i] = int32(c.Shard), c.SubmissionID, c.ChunkIndex
	}
	if OnCitus() {
		_, found, err := q.chunkStatesCitus(ctx, p.Chunks)
		return found, err
	}
	rows, err := q.db.Query(ctx, chunkStates, pgx.NamedArgs{"shards": shards, "submission_ids": sids, "chunk_indexes": idxs})
	if err != nil {
		return nil, err
	}
	known := make([]bool, len(p.Chunks))
	var ord int64
	var k bool
	_, err = pgx.ForEachRow(rows, []any{&ord, &k}, func() error {
		if ord < 1 || ord > int64(len(known)) {
			return fmt.Errorf("chunk state of input %d of %d", ord, len(known))
		}
		known[ord-1] = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	return known, nil
}

//go:embed plan_by_key.sql
var planByKey string

//go:embed plan_by_key_citus.sql
var planByKeyCitus string

// PlanByKey makes the planner, for the rest of db's transaction, plan as statements that
// touch a few chunks by primary key (ChunksComplete). It has no parameters.
func (q Queries) PlanByKey(ctx context.Context) error {
	if OnCitus() {
		_, err := q.db.Exec(ctx, planByKeyCitus)
		return err
	}
	_, err := q.db.Exec(ctx, planByKey)
	return err
}

//go:embed submissions_lock.sql
var submissionsLock string

//go:embed holds_exist.sql
var holdsExist string

// PlanByKeyLock is PlanByKey, SubmissionsLock and holds_exist.sql, in one round trip on
// one PostgreSQL (a pipeline of the three): the completer's first statements when its
// batch has no retry. It returns the submissions locked, and whether any reservation
// holds a max_simultaneous slot.
func (q Queries) PlanByKeyLock(ctx context.Context, ids []int64) (locked []int64, holds bool, err error) {
	if OnCitus() {
		if err := q.PlanByKey(ctx); err != nil {
			return nil, false, err
		}
		if locked, err = q.SubmissionsLock(ctx, ids); err != nil {
			return nil, false, err
		}
		err = q.db.QueryRow(ctx, holdsExist).Scan(&holds)
		return locked, holds, err
	}
	b := &pgx.Batch{}
	b.Queue(planByKey)
	b.Queue(submissionsLock, pgx.NamedArgs{"ids": ids})
	b.Queue(holdsExist)
	res := q.db.SendBatch(ctx, b)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return nil, false, err
	}
	rows, err := res.Query()
	if err != nil {
		return nil, false, err
	}
	if locked, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return nil, false, err
	}
	if err := res.QueryRow().Scan(&holds); err != nil {
		return nil, false, err
	}
	return locked, holds, res.Close()
}

// SubmissionsLock locks submissions ids in id order (submissions_lock.sql) and returns
// those in progress.
func (q Queries) SubmissionsLock(ctx context.Context, ids []int64) ([]int64, error) {
	if OnCitus() {
		return q.submissionsLockCitus(ctx, ids)
	}
	rows, err := q.db.Query(ctx, submissionsLock, pgx.NamedArgs{"ids": ids})
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

//go:embed chunks_complete.sql
var chunksComplete string

// ChunksCompleteParams are chunks_complete.sql's: the chunks completed (the same index
// in each of the first four), every token used, repeats included, and the submissions
// locked by SubmissionsLock.
type ChunksCompleteParams struct {
	SubmissionIDs []int64
	ChunkIndexes  []int32
	Shards        []int32
	Outputs       [][]byte
	Tokens        []string
	Locked        []int64
	// Rows are the chunks' row addresses, where known (0 elsewhere; nil for none): those
	// are deleted by address (RowAddr). Citus's form reads them not.
	Rows []RowAddr
	// Notify are notifications sent in the same round trip as the statement (notify.sql,
	// at the commit of the transaction): on Citus, after it.
	Notify []NotifyParams
}

// ChunksCompleteRow is a chunk that a batch completed, and whether that completed every
// chunk of its submission.
type ChunksCompleteRow struct {
	SubmissionID       int64
	ChunkIndex         int32
	Shard              int
	SubmissionFinished bool
}

// ChunksComplete completes a batch of chunks and returns those it completed (the first
// completion of each). Scanned by position: it is the hot path.
func (q Queries) ChunksComplete(ctx context.Context, p ChunksCompleteParams) ([]ChunksCompleteRow, error) {
	if OnCitus() {
		done, err := q.chunksCompleteCitus(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, n := range p.Notify {
			if err := q.Notify(ctx, n); err != nil {
				return nil, err
			}
		}
		return done, nil
	}
	if p.Rows == nil {
		p.Rows = make([]RowAddr, len(p.SubmissionIDs))
	}
	positions, finished, err := q.chunksComplete(ctx, p)
	if err != nil {
		return nil, err
	}
	// The chunks given by address that were not completed: their rows moved (a retry
	// updated one, VACUUM FULL rewrote the table), or they are finished. Again by key, in
	// the same transaction, which sees what the first statement did.
	completed := make([]bool, len(p.Rows))
	for _, pos := range positions {
		if pos >= 1 && int(pos) <= len(completed) { // completedRows refuses the others
			completed[pos-1] = true
		}
	}
	var again []int
	for i, row := range p.Rows {
		if row != 0 && !completed[i] {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		r := ChunksCompleteParams{Tokens: []string{}, Locked: p.Locked, Rows: make([]RowAddr, len(again))}
		for _, i := range again {
			r.SubmissionIDs = append(r.SubmissionIDs, p.SubmissionIDs[i])
			r.ChunkIndexes = append(r.ChunkIndexes, p.ChunkIndexes[i])
			r.Shards = append(r.Shards, p.Shards[i])
			r.Outputs = append(r.Outputs, p.Outputs[i])
		}
		pos2, fin2, err := q.chunksComplete(ctx, r)
		if err != nil {
			return nil, err
		}
		for _, pos := range pos2 {
			if pos < 1 || int(pos) > len(again) {
				return nil, fmt.Errorf("chunks_complete.sql answered position %d of a batch of %d", pos, len(again))
			}
			positions = append(positions, int32(again[pos-1]+1))
		}
		finished = append(finished, fin2...)
	}
	return completedRows(p, positions, finished)
}

// chunksComplete runs chunks_complete.sql once, and p.Notify's notifications after it in
// the same round trip: the 1-based positions in p of the chunks it completed, and the
// submissions it finished.
func (q Queries) chunksComplete(ctx context.Context, p ChunksCompleteParams) (positions []int32, finished []int64, err error) {
	b := &pgx.Batch{}
	b.Queue(chunksComplete, pgx.NamedArgs{
		"submission_ids": p.SubmissionIDs, "chunk_indexes": p.ChunkIndexes, "shards": p.Shards, "outputs": p.Outputs, "tokens": p.Tokens,
		"locked": p.Locked, "rows": p.Rows,
	})
	for _, n := range p.Notify {
		b.Queue(notify, pgx.NamedArgs{"channel": n.Channel, "payload": n.Payload})
	}
	res := q.db.SendBatch(ctx, b)
	defer res.Close()
	if err := res.QueryRow().Scan(&positions, &finished); err != nil {
		return nil, nil, err
	}
	for range p.Notify {
		if _, err := res.Exec(); err != nil {
			return nil, nil, err
		}
	}
	if err := res.Close(); err != nil {
		return nil, nil, err
	}
	return positions, finished, nil
}

// contains says whether finished holds id: a scan of a short list, a binary search of a
// long one (sorted by completedRows).
func contains(finished []int64, id int64) bool {
	if len(finished) > 16 {
		_, ok := slices.BinarySearch(finished, id)
		return ok
	}
	return slices.Contains(finished, id)
}

// completedRows turns chunks_complete.sql's answer (the 1-based positions of the chunks it
// completed, and the submissions it finished) into a row per completed chunk.
func completedRows(p ChunksCompleteParams, positions []int32, finished []int64) ([]ChunksCompleteRow, error) {
	out := make([]ChunksCompleteRow, 0, len(positions))
	if len(finished) > 16 { // many single-chunk submissions: a search each would be quadratic
		slices.Sort(finished)
	}
	for _, pos := range positions {
		i := int(pos) - 1
		if i < 0 || i >= len(p.SubmissionIDs) {
			return nil, fmt.Errorf("chunks_complete.sql answered position %d of a batch of %d", pos, len(p.SubmissionIDs))
		}
		out = append(out, ChunksCompleteRow{SubmissionID: p.SubmissionIDs[i], ChunkIndex: p.ChunkIndexes[i],
			Shard: int(p.Shards[i]), SubmissionFinished: contains(finished, p.SubmissionIDs[i])})
	}
	return out, nil
}

//go:embed submissions_finish_completed.sql
var submissionsFinishCompleted string

// SubmissionsFinishCompletedParams are submissions_finish_completed.sql's.
type SubmissionsFinishCompletedParams struct {
	IDs []int64
}

// SubmissionsFinishCompleted moves the submissions of p.IDs whose every chunk is done to
// submissions_completed.
func (q Queries) SubmissionsFinishCompleted(ctx context.Context, p SubmissionsFinishCompletedParams) error {
	if OnCitus() {
		return q.submissionsFinishCitus(ctx, p.IDs)
	}
	_, err := q.db.Exec(ctx, submissionsFinishCompleted, pgx.NamedArgs{"ids": p.IDs})
	return err
}

//go:embed chunk_inputs.sql
var chunkInputs string

// ChunkInputsParams are chunk_inputs.sql's.
type ChunkInputsParams struct {
	Chunks []Chunk
}

// ChunkInputsRow is one chunk's input.
type ChunkInputsRow struct {
	SubmissionID int64
	ChunkIndex   int32
	Input        []byte
}

// ChunkInputs reads the inputs of p.Chunks (those that still exist), in no order. fn is
// called for each; its row's Input is valid only during the call.
func (q Queries) ChunkInputs(ctx context.Context, p ChunkInputsParams, fn func(ChunkInputsRow) error) error {
	sids := make([]int64, len(p.Chunks))
	idxs := make([]int32, len(p.Chunks))
	shards := make([]int32, len(p.Chunks))
	for i, c := range p.Chunks {
		sids[i], idxs[i], shards[i] = c.SubmissionID, c.ChunkIndex, int32(c.Shard)
	}
	rows, err := q.db.Query(ctx, chunkInputs, pgx.NamedArgs{"submission_ids": sids, "chunk_indexes": idxs, "shards": shards})
	if err != nil {
		return err
	}
	var r ChunkInputsRow
	_, err = pgx.ForEachRow(rows, []any{&r.SubmissionID, &r.ChunkIndex, &r.Input}, func() error { return fn(r) })
	return err
}

//go:embed chunks_skip_submission.sql
var chunksSkipSubmission string

// ChunksSkipSubmissionParams are chunks_skip_submission.sql's.
type ChunksSkipSubmissionParams struct {
	SubmissionID int64
}

// ChunksSkipSubmission deletes the reservable chunks of a submission.
func (q Queries) ChunksSkipSubmission(ctx context.Context, p ChunksSkipSubmissionParams) error {
	_, err := q.db.Exec(ctx, chunksSkipSubmission, pgx.NamedArgs{"submission_id": p.SubmissionID})
	return err
}

//go:embed chunks_skip_range.sql
var chunksSkipRange string

// ChunksSkipRangeParams are chunks_skip_range.sql's.
type ChunksSkipRangeParams struct {
	SubmissionID int64
	From, To     int32 // chunk indexes, To excluded
	// Failed: the submission failed; else it was cancelled.
	Failed bool
	// Error is what the skipped chunks record (SubmissionEndedLock's).
	Error string
}

// ChunksSkipRange moves the pending chunks of a range of a cancelled or failed submission
// to chunks_failed, skipped, and counts them on it; it returns the submission's chunks
// skipped so far.
func (q Queries) ChunksSkipRange(ctx context.Context, p ChunksSkipRangeParams) (int64, error) {
	var skipped int64
	err := q.db.QueryRow(ctx, chunksSkipRange, pgx.NamedArgs{"submission_id": p.SubmissionID, "from": p.From, "to": p.To,
		"failed": p.Failed, "error": p.Error}).Scan(&skipped)
	return skipped, notFound(err)
}

//go:embed chunks_delete_range.sql
var chunksDeleteRange string

// ChunksDeleteRangeParams are chunks_delete_range.sql's.
type ChunksDeleteRangeParams struct {
	SubmissionID int64
	From, To     int32 // chunk indexes, To excluded
}

// ChunksDeleteRange removes a range of the chunks of a submission that was never inserted
// whole.
func (q Queries) ChunksDeleteRange(ctx context.Context, p ChunksDeleteRangeParams) error {
	_, err := q.db.Exec(ctx, chunksDeleteRange, pgx.NamedArgs{"submission_id": p.SubmissionID, "from": p.From, "to": p.To})
	return err
}

// collectOne runs query and returns its one row, scanned by name into T; ErrNotFound when
// it returns none.
func collectOne[T any](ctx context.Context, db DB, query string, args pgx.NamedArgs) (T, error) {
	rows, err := db.Query(ctx, query, args)
	if err != nil {
		var zero T
		return zero, err
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[T])
	return r, notFound(err)
}

// collect runs query and returns its rows, scanned by name into T. args nil: the
// statement has no parameters.
func collect[T any](ctx context.Context, db DB, query string, args pgx.NamedArgs) ([]T, error) {
	var a []any
	if args != nil {
		a = []any{args}
	}
	rows, err := db.Query(ctx, query, a...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[T])
}

//go:embed chunks_stats_stale.sql
var chunksStatsStale string

// ChunksStatsStale reports whether the planner believes opsq.chunks to hold under half of
// its live rows, or of ingested (rows a commit just added), with at least minRows of them
// (chunks_stats_stale.sql).
func (q Queries) ChunksStatsStale(ctx context.Context, minRows, ingested int64) (bool, error) {
	var stale bool
	err := q.db.QueryRow(ctx, chunksStatsStale, pgx.NamedArgs{"min_rows": minRows, "ingested": ingested}).Scan(&stale)
	return stale, err
}

//go:embed chunks_analyze.sql
var chunksAnalyze string

// ChunksAnalyze runs ANALYZE on opsq.chunks, unless another session is at it
// (chunks_analyze.sql).
func (q Queries) ChunksAnalyze(ctx context.Context) error {
	_, err := q.db.Exec(ctx, chunksAnalyze)
	return err
}

//go:embed chunks_promote.sql
var chunksPromote string

// ChunksPromoteParams are chunks_promote.sql's.
type ChunksPromoteParams struct {
	Limit int
	// Shards, on Citus, are the shards whose due chunks are moved: the instance's own
	// (chunks_promote_due.sql says why); none, nothing is. One PostgreSQL moves the due
	// chunks of every shard in one index scan, whoever holds them.
	Shards []int32
}

// ChunksPromote makes up to p.Limit waiting chunks that are due reservable, and returns the
// shard of each.
func (q Queries) ChunksPromote(ctx context.Context, p ChunksPromoteParams) ([]int, error) {
	if OnCitus() {
		return q.chunksPromoteCitus(ctx, p)
	}
	rows, err := collect[struct {
		Shard int `db:"shard"`
	}](ctx, q.db, chunksPromote, pgx.NamedArgs{"limit": p.Limit})
	shards := make([]int, len(rows))
	for i, r := range rows {
		shards[i] = r.Shard
	}
	return shards, err
}
