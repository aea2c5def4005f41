package submissions

import (
	"context"
	"testing"
	"time"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// TestHoldLimitEndsAStoppedHolder: a submit with a HoldLimit (a schedule's run) whose
// instance stops answering while it holds the idempotency key (a second connection that
// took the key under the same limit and then does nothing, as a SIGSTOPped instance does)
// has its transaction ended by PostgreSQL, and another submit of the same key makes the
// submission: once, within the bound, not after the holder's whim.
func TestHoldLimitEndsAStoppedHolder(t *testing.T) {
	t.Parallel()
	s, pool := setup(t, SliceRows)
	const limit = 2 * time.Second
	key := "schedule:nightly:2026-01-01T00:00:00Z"

	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	db := opsqsql.New(tx)
	if err := db.TxHoldLimit(t.Context(), limit); err != nil {
		t.Fatal(err)
	}
	if took, err := db.IdempotencyClaim(t.Context(), opsqsql.IdempotencyClaimParams{Tenant: TenantDefault, Key: key, SubmissionID: 1}); err != nil || !took {
		t.Fatalf("the holder's claim: %t, %v", took, err)
	}
	// The holder stops answering here. Without the limit the submit below would wait on the
	// key until its own context ended (20 s) and fail.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	created, err := s.Submit(ctx, NewSubmission{Prefix: "s3://bucket/run/", ChunkCount: 1, IdempotencyKey: key, HoldLimit: limit}, nil)
	if err != nil || created.Existing || created.ID == 1 {
		t.Fatalf("the second submit of the key, %s after the holder stopped: %+v, %v; want a new submission", time.Since(start), created, err)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.submissions WHERE id = $1", created.ID); n != 1 {
		t.Errorf("submission %d exists %d times; want once", created.ID, n)
	}
	// The holder's session was ended: its transaction is gone.
	if err := tx.Commit(t.Context()); err == nil {
		t.Errorf("the stopped holder's commit succeeded; want its session ended by PostgreSQL")
	}
	// A producer's submit (no HoldLimit) leaves the session's settings as they were.
	var timeout string
	if err := pool.QueryRow(t.Context(), "SHOW idle_in_transaction_session_timeout").Scan(&timeout); err != nil || timeout != "0" {
		t.Errorf("idle_in_transaction_session_timeout after the submits: %q, %v; want 0 (the limit was the transaction's own)", timeout, err)
	}
}
