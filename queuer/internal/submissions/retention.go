package submissions

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// Retention batch sizes: small, so that no statement holds locks or builds WAL for long.
const (
	retentionSubmissionBatch = 100
	retentionChunkBatch      = 5000
)

// DeleteExpired deletes the submissions that finished before now minus the retention
// setting, with their chunk rows, strategic metadata and idempotency keys, in small
// batches. It returns how many submissions it deleted. Several instances may run it at
// once; they only share the work.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	settings, err := claims.LoadSettings(ctx, s.cfg.Pool)
	if err != nil {
		return 0, err
	}
	cutoff := now.Add(-settings.Retention)
	deleted := 0
	for {
		ids, err := opsqsql.New(s.cfg.Pool).RetentionExpired(ctx, opsqsql.RetentionExpiredParams{Cutoff: cutoff, Limit: retentionSubmissionBatch})
		if err != nil {
			return deleted, fmt.Errorf("finding expired submissions: %w", err)
		}
		for _, id := range ids {
			if err := s.deleteSubmission(ctx, id); err != nil {
				return deleted, err
			}
			deleted++
		}
		if len(ids) < retentionSubmissionBatch {
			return deleted, nil
		}
	}
}

// deleteSubmission deletes one finished submission: its chunk rows batch by batch, then
// the submission itself.
func (s *Store) deleteSubmission(ctx context.Context, id int64) error {
	db := opsqsql.New(s.cfg.Pool)
	for {
		n, err := db.RetentionDeleteChunks(ctx, opsqsql.RetentionDeleteChunksParams{SubmissionID: id, Batch: retentionChunkBatch})
		if err != nil {
			return fmt.Errorf("deleting chunks of expired submission %d: %w", id, err)
		}
		if n == 0 {
			break
		}
	}
	if err := db.RetentionDeleteSubmission(ctx, opsqsql.RetentionDeleteSubmissionParams{SubmissionID: id}); err != nil {
		return fmt.Errorf("deleting expired submission %d: %w", id, err)
	}
	return nil
}

// RunRetention deletes the expired submissions and logs what it did (the retention job).
func (s *Store) RunRetention(ctx context.Context) {
	n, err := s.DeleteExpired(ctx, s.cfg.Now())
	switch {
	case err != nil && ctx.Err() == nil:
		s.cfg.Log.Warn("retention", slog.Any("error", err))
	case n > 0:
		s.cfg.Log.Info("retention deleted expired submissions", slog.Int("submissions", n))
	}
}
