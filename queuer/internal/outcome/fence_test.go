package outcome

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/internal/waiters"
	"opsq/queuer/opsqtype"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// noHolds holds no max_simultaneous slot.
type noHolds struct{}

func (noHolds) ReleaseHolds(context.Context, []string) {}

// newTestRecorder returns a recorder on pool, started and stopped when the test ends (its
// expirer has nothing to expire: no reservation is made here), and a submissions store to
// insert chunks with.
func newTestRecorder(t *testing.T, pool *pgxpool.Pool) (*Recorder, *submissions.Store) {
	t.Helper()
	log := pgtest.Logger(t, slog.LevelWarn)
	settings, err := claims.LoadSettings(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	keys := tokens.NewKeyring(pool, log)
	if err := keys.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	var bus notify.Bus
	o := New(Config{Pool: pool, ShardCount: settings.ShardCount, Log: log, Now: time.Now, Instance: "fence-test", Reserver: reserver.New(reserver.Config{}),
		Keys: keys, Holds: noHolds{}, Bus: &bus})
	if err := o.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Stop)
	ids := submissions.NewIDs()
	ids.SetNode(1, time.Now().Add(time.Hour))
	subs := submissions.New(submissions.Config{Pool: pool, ShardCount: settings.ShardCount, Log: log, Now: time.Now, IDs: ids, Admission: waiters.New(0, 0), Bus: &bus})
	return o, subs
}

// oneChunk yields one chunk.
type oneChunk struct{ done bool }

func (c *oneChunk) Next() ([]byte, error) {
	if c.done {
		return nil, io.EOF
	}
	c.done = true
	return []byte("x"), nil
}

// TestFencedWriteUnderAStaleGenerationNamesTheShard: the owner's write about an expired
// lease (a retry, or a failure for good once the attempts are spent) under a generation
// it no longer holds the shard at is refused by the statement itself, as a
// *sql.FenceError naming the shard and the generation, and writes nothing; under the
// generation it holds, the same write happens.
func TestFencedWriteUnderAStaleGenerationNamesTheShard(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	o, subs := newTestRecorder(t, pool)
	noRetry := 0
	for _, sub := range []submissions.NewSubmission{{}, {MaxRetries: &noRetry}} {
		c, err := subs.Submit(t.Context(), sub, &oneChunk{})
		if err != nil {
			t.Fatal(err)
		}
		// The chunk's shard, held by this recorder's instance at generation 7.
		tok := tokens.Token{Key: reserver.Key{SubmissionID: c.ID}, Shard: opsqtype.ShardOf(c.ID, 0, o.shardCount), Generation: 7}
		if _, err := pool.Exec(t.Context(), "UPDATE opsq.shard_claims SET claimant = $1, generation = $2 WHERE shard = $3",
			o.cfg.Instance, tok.Generation, tok.Shard); err != nil {
			t.Fatal(err)
		}

		stale := &opsqsql.Fence{Claimant: o.cfg.Instance, Generation: tok.Generation + 1}
		st, err := o.failAttempt(t.Context(), attempt{t: tok, msg: errReservationExpired, retry: true, fence: stale})
		var fenced *opsqsql.FenceError
		if !errors.As(err, &fenced) {
			t.Fatalf("failAttempt under a stale generation = %q, %v; want a *sql.FenceError", st, err)
		}
		if fenced.Shard != tok.Shard || fenced.Generation != stale.Generation {
			t.Errorf("FenceError names shard %d generation %d; want shard %d generation %d", fenced.Shard, fenced.Generation, tok.Shard, stale.Generation)
		}
		if !errors.Is(err, claims.ErrShardLost) {
			t.Errorf("errors.Is(%v, claims.ErrShardLost) = false; want true", err)
		}
		state, p, err := readChunk(t.Context(), pool, tok)
		if err != nil || state != chunkPending || p.retries != tok.Retries {
			t.Fatalf("after the refused write the chunk is %q with %d retries (%v); want pending with %d", state, p.retries, err, tok.Retries)
		}

		held := &opsqsql.Fence{Claimant: o.cfg.Instance, Generation: tok.Generation}
		st, err = o.failAttempt(t.Context(), attempt{t: tok, msg: errReservationExpired, retry: true, fence: held})
		if err != nil {
			t.Fatalf("failAttempt under the held generation: %v", err)
		}
		if p.maxRetries > 0 && st != "retrying" || p.maxRetries == 0 && st != "failed" {
			t.Errorf("failAttempt under the held generation (max_retries %d) = %q; want retrying, or failed when no attempt remains", p.maxRetries, st)
		}
	}
}

// TestStaleTokenFailIsLost: a consumer's fail of a token issued before its chunk's shard
// changed owner is lost and changes nothing (the chunk was, or will be, handed out again
// by the new owner); a fail of a token of the current generation counts.
func TestStaleTokenFailIsLost(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	o, subs := newTestRecorder(t, pool)
	noRetry := 0
	c, err := subs.Submit(t.Context(), submissions.NewSubmission{MaxRetries: &noRetry}, &oneChunk{})
	if err != nil {
		t.Fatal(err)
	}
	shard := opsqtype.ShardOf(c.ID, 0, o.shardCount)
	// The shard moved from generation 7 (the old holder's) to 8 (the new one's).
	if _, err := pool.Exec(t.Context(), "UPDATE opsq.shard_claims SET claimant = 'new-holder', generation = 8 WHERE shard = $1", shard); err != nil {
		t.Fatal(err)
	}
	token := func(gen int64) string {
		return tokens.New(reserver.Key{SubmissionID: c.ID}, shard, gen, 0).Signed(o.cfg.Keys).String()
	}
	for _, retry := range []bool{false, true} {
		st, err := o.Fail(t.Context(), []Failure{{Token: token(7), Error: "from the old holder", Retry: retry}})
		if err != nil || st[0] != opsqtype.StatusLost {
			t.Fatalf("fail (retry %v) of a token of generation 7 with the shard at 8: %v, %v; want lost", retry, st, err)
		}
	}
	state, p, err := readChunk(t.Context(), pool, tokens.Token{Key: reserver.Key{SubmissionID: c.ID}, Shard: shard})
	if err != nil || state != chunkPending || p.retries != 0 {
		t.Fatalf("after the stale fails the chunk is %q with %d retries (%v); want pending with 0", state, p.retries, err)
	}
	if st, err := subs.Status(t.Context(), c.ID); err != nil || st.State != opsqtype.StateInProgress {
		t.Fatalf("after the stale fails the submission is %q (%v); want in progress", st.State, err)
	}
	st, err := o.Fail(t.Context(), []Failure{{Token: token(8), Error: "from the new holder"}})
	if err != nil || st[0] != opsqtype.StatusFailed {
		t.Fatalf("fail of a token of the current generation: %v, %v; want failed", st, err)
	}
}
