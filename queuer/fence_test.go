package queuer

import (
	"errors"
	"testing"

	"opsq/claims"
	opsqsql "opsq/sql"
)

// TestFencedWriteUnderAStaleGenerationNamesTheShard: the owner's write about an expired
// lease (a retry, or a failure for good once the attempts are spent) under a generation
// it no longer holds the shard at is refused by the statement itself, as a
// *sql.FenceError naming the shard and the generation, and writes nothing; under the
// generation it holds, the same write happens.
func TestFencedWriteUnderAStaleGenerationNamesTheShard(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	maxRetries := 0
	submitN(t, q, 1, NewSubmission{})
	submitN(t, q, 1, NewSubmission{MaxRetries: &maxRetries})
	chunks := reserveN(t, q, ReserveRequest{Max: 2})
	if len(chunks) != 2 {
		t.Fatalf("reserved %d chunks; want 2", len(chunks))
	}
	for _, c := range chunks {
		tok, ok := q.readToken(c.Token)
		if !ok {
			t.Fatalf("token %q does not read", c.Token)
		}
		stale := &opsqsql.Fence{Claimant: q.cfg.Instance.ID, Generation: tok.generation + 1}
		st, err := q.failAttempt(t.Context(), tok, "", errReservationExpired, true, stale)
		var fenced *opsqsql.FenceError
		if !errors.As(err, &fenced) {
			t.Fatalf("failAttempt under a stale generation = %q, %v; want a *sql.FenceError", st, err)
		}
		if fenced.Shard != tok.shard || fenced.Generation != stale.Generation {
			t.Errorf("FenceError names shard %d generation %d; want shard %d generation %d", fenced.Shard, fenced.Generation, tok.shard, stale.Generation)
		}
		if !errors.Is(err, claims.ErrShardLost) {
			t.Errorf("errors.Is(%v, claims.ErrShardLost) = false; want true", err)
		}
		state, p, err := readChunk(t.Context(), q.pool, tok)
		if err != nil || state != chunkPending || p.retries != tok.retries {
			t.Fatalf("after the refused write the chunk is %q with %d retries (%v); want pending with %d", state, p.retries, err, tok.retries)
		}

		held := &opsqsql.Fence{Claimant: q.cfg.Instance.ID, Generation: tok.generation}
		st, err = q.failAttempt(t.Context(), tok, "", errReservationExpired, true, held)
		if err != nil {
			t.Fatalf("failAttempt under the held generation: %v", err)
		}
		if p.maxRetries > 0 && st != "retrying" || p.maxRetries == 0 && st != "failed" {
			t.Errorf("failAttempt under the held generation (max_retries %d) = %q; want retrying, or failed when no attempt remains", p.maxRetries, st)
		}
	}
}
