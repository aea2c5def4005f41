package sql

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ChunkCopyColumns are the columns of a chunk row as ChunksCopy streams it, in the order
// of the values of each row: a chunk that waits (ChunksCopyParams.Waiting) has one more,
// ready_at, last.
var ChunkCopyColumns = []string{"submission_id", "chunk_index", "shard", "random_order", "input"}

// ChunksCopyParams are the chunks ChunksCopy streams in.
type ChunksCopyParams struct {
	// Rows yields each chunk's values in the order of ChunkCopyColumns (and ready_at, when
	// Waiting).
	Rows pgx.CopyFromSource
	// Waiting puts them in opsq.chunks_waiting, until their ready_at, rather than in
	// opsq.chunks, where reserves read.
	Waiting bool
}

// ChunksCopy streams chunks into PostgreSQL with COPY, so that memory stays flat whatever
// their number, and returns how many it wrote. Run in a transaction (InTx) it commits with
// the submission's row; run on a pool it commits at once (a slice of a large ingest).
func (q Queries) ChunksCopy(ctx context.Context, p ChunksCopyParams) (int64, error) {
	table, columns := "chunks", ChunkCopyColumns
	if p.Waiting {
		table, columns = "chunks_waiting", append(columns[:len(columns):len(columns)], "ready_at")
	}
	return q.db.CopyFrom(ctx, pgx.Identifier{"opsq", table}, columns, p.Rows)
}
