package submissions

import (
	"context"
	"fmt"

	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// Failures returns the chunks of the submission that failed at least one attempt (those
// with an error kept, across retries of the submission), in chunk order, from the one
// after chunk index after (-1: from the first), at most limit (1 to FailuresPageMax) and
// at most FailuresPageBytesMax bytes as an answer writes them (at least one chunk), and
// whether more follow. Each is in one of the FailedChunk states, with its retries count
// wherever the chunk is and its last errors (at most ErrorsKept), newest first.
// ErrNotFound for an unknown submission.
func (s *Store) Failures(ctx context.Context, id, after int64, limit int) ([]FailedChunk, bool, error) {
	limit = min(max(limit, 1), FailuresPageMax)
	if _, err := s.Status(ctx, id); err != nil {
		return nil, false, err
	}
	db := opsqsql.New(s.cfg.Pool)
	idxs, err := db.ChunkErrorsPage(ctx, opsqsql.ChunkErrorsPageParams{
		SubmissionID: id, After: int32(max(after, -1)), Limit: limit + 1,
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the failed chunks of submission %d: %w", id, err)
	}
	more := len(idxs) > limit
	if more {
		idxs = idxs[:limit]
	}
	out := []FailedChunk{}
	if len(idxs) == 0 {
		return out, false, nil
	}
	shards := make([]int32, len(idxs))
	for i, idx := range idxs {
		shards[i] = int32(opsqtype.ShardOf(id, int(idx), s.shardCount))
	}
	rows, err := db.ChunkFailures(ctx, opsqsql.ChunkFailuresParams{
		SubmissionID: id, ChunkIndexes: idxs, Shards: shards, Kept: ErrorsKept,
		MaxBytes: FailuresPageBytesMax - failuresPageOverhead,
	})
	if err != nil {
		return nil, false, fmt.Errorf("reading the failed chunks of submission %d: %w", id, err)
	}
	if len(rows) < len(idxs) {
		more = true // the page stopped at its byte bound: the rows are the first chunks'
	}
	for _, r := range rows {
		fc := FailedChunk{ChunkIndex: int64(r.ChunkIndex), State: r.State, Retries: r.Retries, Errors: make([]AttemptError, len(r.Errors))}
		for i := range r.Errors {
			fc.Errors[i] = AttemptError{Error: r.Errors[i], Consumer: r.Consumers[i], At: r.Ats[i]}
		}
		out = append(out, fc)
	}
	return out, more, nil
}

// The states of a FailedChunk.
const (
	FailedChunkFailed    = "failed"    // its attempts spent
	FailedChunkSkipped   = "skipped"   // its submission failed or was cancelled first
	FailedChunkRetrying  = "retrying"  // to be handed out again, or in flight
	FailedChunkCompleted = "completed" // it failed before, then completed
)
