package submissions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// ChunkPreviewMax is how much of a chunk's input and of its output Chunk reads at most.
const ChunkPreviewMax = 4 << 10

// ChunkInfo is one chunk as the dashboard's chunk page shows it.
type ChunkInfo struct {
	ChunkIndex int64
	// State is where the chunk is: "pending" (reservable, or reserved: reservations are in
	// memory only), "waiting" (until ReadyAt: a retry's backoff or its submission's
	// not_before; ReadyAt nil while its submission is paused), "failed", "skipped",
	// "completed", or "" when no table holds it (a skipped chunk of a finished submission
	// that was counted without a row, or one not stored yet).
	State   string
	Retries int64 // failed attempts of its current attempt budget
	// Input and Output are the first ChunkPreviewMax bytes of each; InputSize and
	// OutputSize their whole sizes, -1 when none is stored (a completed chunk's input is
	// not kept; an object-storage chunk has none).
	Input, Output         []byte
	InputSize, OutputSize int64
	ReadyAt               *time.Time
	Error                 string         // a failed chunk's last error
	Errors                []AttemptError // its kept failed attempts (ErrorsKept), newest first
}

// Chunk returns chunk index of submission id (ErrNotFound for an unknown submission or
// an index past its chunks), read by primary keys: where it is, the start of its input and
// output, and its kept errors.
func (s *Store) Chunk(ctx context.Context, id, index int64) (ChunkInfo, error) {
	st, err := s.Status(ctx, id)
	if err != nil {
		return ChunkInfo{}, err
	}
	if index < 0 || index >= st.ChunksTotal {
		return ChunkInfo{}, ErrNotFound
	}
	db := opsqsql.New(s.cfg.Pool)
	shard := int32(opsqtype.ShardOf(id, int(index), s.shardCount))
	out := ChunkInfo{ChunkIndex: index, InputSize: -1, OutputSize: -1}
	r, err := db.ChunkDetail(ctx, opsqsql.ChunkDetailParams{SubmissionID: id, ChunkIndex: int32(index), Shard: shard, MaxBytes: ChunkPreviewMax})
	switch {
	case errors.Is(err, opsqsql.ErrNotFound):
	case err != nil:
		return ChunkInfo{}, fmt.Errorf("reading chunk %d/%d: %w", id, index, err)
	default:
		out.State, out.Retries, out.Input, out.Output, out.ReadyAt = r.State, r.Retries, r.Input, r.Output, r.ReadyAt
		if r.InputSize != nil {
			out.InputSize = *r.InputSize
		}
		if r.OutputSize != nil {
			out.OutputSize = *r.OutputSize
		}
		if r.Error != nil {
			out.Error = *r.Error
		}
	}
	// Its errors, as the failures page reads them (chunk_failures.sql).
	rows, err := db.ChunkFailures(ctx, opsqsql.ChunkFailuresParams{
		SubmissionID: id, ChunkIndexes: []int32{int32(index)}, Shards: []int32{shard}, Kept: ErrorsKept,
	})
	if err != nil {
		return ChunkInfo{}, fmt.Errorf("reading the errors of chunk %d/%d: %w", id, index, err)
	}
	for _, r := range rows {
		for i := range r.Errors {
			out.Errors = append(out.Errors, AttemptError{Error: r.Errors[i], Consumer: r.Consumers[i], At: r.Ats[i]})
		}
	}
	return out, nil
}
