package queuer

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// chunkRow is what the database holds of a pending chunk.
type chunkRow struct {
	pending bool
	retries int32
}

func readChunkRow(t *testing.T, pool *pgxpool.Pool, sid int64, idx int32) chunkRow {
	t.Helper()
	var r chunkRow
	err := pool.QueryRow(context.Background(), "SELECT retries FROM opsq.chunks WHERE submission_id = $1 AND chunk_index = $2", sid, idx).Scan(&r.retries)
	if err == nil {
		r.pending = true
	} else if err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return r
}

// actOnAll completes, fails (with and without retry) and extends every token, and
// checks that each answer is "unknown".
func actOnAll(t *testing.T, q *Queuer, tokens []string) {
	t.Helper()
	ctx := t.Context()
	comps := make([]Completion, len(tokens))
	fails := make([]Failure, len(tokens))
	for i, tok := range tokens {
		comps[i] = Completion{Token: tok, Output: []byte("forged")}
		fails[i] = Failure{Token: tok, Error: "forged"}
	}
	check := func(what string, statuses []opsqtype.TokenStatus, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, st := range statuses {
			if st != opsqtype.StatusUnknown {
				t.Fatalf("%s of %q: %s; want unknown", what, tokens[i], st)
			}
		}
	}
	st, err := q.Complete(ctx, comps)
	check("complete", st, err)
	st, err = q.Fail(ctx, fails)
	check("fail with retry false", st, err)
	for i := range fails {
		fails[i].Retry = true
	}
	st, err = q.Fail(ctx, fails)
	check("fail with retry true", st, err)
	ext, err := q.Extend(ctx, tokens, time.Hour, false)
	st = make([]opsqtype.TokenStatus, len(ext))
	for i, e := range ext {
		st[i] = e.Status
	}
	check("extend", st, err)
}

// handMadeTokens are the tokens an attacker who knows a submission id can build without
// the cluster secret: for each chunk index, the old unsigned layout, and the signed layout
// with key 1 and a MAC of zeros or one made with a guessed secret.
func handMadeTokens(sid int64, chunks, shardCount int) []string {
	var out []string
	for idx := range chunks {
		for shard := range shardCount {
			v1 := []byte{1}
			v1 = binary.BigEndian.AppendUint64(v1, uint64(sid))
			v1 = binary.BigEndian.AppendUint32(v1, uint32(idx))
			v1 = binary.BigEndian.AppendUint16(v1, uint16(shard))
			v1 = append(v1, make([]byte, 8+4+8)...)
			out = append(out, base64.RawURLEncoding.EncodeToString(v1))
			guessed := tokens.New(reserver.Key{SubmissionID: sid, ChunkIndex: int32(idx)}, shard, 0, 0).Signed(tokens.NewStaticKeyring(make([]byte, 32))).String()
			b, _ := base64.RawURLEncoding.DecodeString(guessed)
			clear(b[len(b)-tokens.MACLen:]) // key 1, a MAC of zeros
			out = append(out, base64.RawURLEncoding.EncodeToString(b), guessed)
		}
	}
	return out
}

// TestForgedTokensAreUnknown: every one-character change of a real token, and every token
// built by hand from the submission id, is unknown to complete, fail and extend, and the
// chunk stays pending and reserved, its submission in progress.
func TestForgedTokensAreUnknown(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	maxRetries := 0
	id := submitN(t, q, 2, NewSubmission{MaxRetries: &maxRetries})
	c := reserveN(t, q, ReserveRequest{Max: 1})[0]
	forged := oneCharacterChanges(c.Token)
	forged = append(forged, handMadeTokens(id, 2, q.shardCount)...)
	actOnAll(t, q, forged)

	if r := readChunkRow(t, pool, id, c.ChunkIndex); !r.pending || r.retries != 0 {
		t.Fatalf("after forged tokens: chunk pending %v with %d retries; want pending with 0", r.pending, r.retries)
	}
	if _, ok := q.reserver.Get(c.Token); !ok {
		t.Fatal("after forged tokens: the chunk's reservation is gone; want it held")
	}
	if st, err := q.Status(t.Context(), id); err != nil || st.State != opsqtype.StateInProgress || st.ChunksDone != 0 {
		t.Fatalf("after forged tokens: submission %+v, %v; want in progress with nothing done", st, err)
	}
	// The real token still works: the forged ones could have acted, had they verified.
	st, err := q.Complete(t.Context(), []Completion{{Token: c.Token}})
	if err != nil || st[0] != opsqtype.StatusCompleted {
		t.Fatalf("completing with the real token: %v, %v; want completed", st, err)
	}
}

// copyRows copies the rows of table matching where (with arg) from one database to another.
func copyRows(t *testing.T, from, to *pgxpool.Pool, table, where string, arg any) int {
	t.Helper()
	rows, err := from.Query(t.Context(), "SELECT row_to_json(r) FROM "+table+" r WHERE "+where, arg)
	if err != nil {
		t.Fatal(err)
	}
	js, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range js {
		if _, err := to.Exec(t.Context(), "INSERT INTO "+table+" SELECT * FROM json_populate_record(NULL::"+table+", $1::json)", j); err != nil {
			t.Fatalf("copying a row of %s: %v", table, err)
		}
	}
	return len(js)
}

// TestTokenFromAnotherDatabaseIsUnknown: database B holds the same submission and chunk as
// A but has its own cluster secret (as any database migrated on its own): a token A signed
// is unknown to B, and acts on nothing there.
func TestTokenFromAnotherDatabaseIsUnknown(t *testing.T) {
	t.Parallel()
	qa, poolA := setup(t)
	poolB := connect(t, pgtest.NewDBWithShards(t, 2*qa.shardCount)) // migrated apart: its own secret
	id := submitN(t, qa, 1, NewSubmission{})
	if copyRows(t, poolA, poolB, "opsq.submissions", "id = $1", id) != 1 ||
		copyRows(t, poolA, poolB, "opsq.chunks", "submission_id = $1", id) != 1 {
		t.Fatal("copying the submission to database B: want 1 submission and 1 chunk")
	}
	qb := startQueuer(t, poolB)
	tokA := reserveN(t, qa, ReserveRequest{})[0].Token

	actOnAll(t, qb, []string{tokA})
	if r := readChunkRow(t, poolB, id, 0); !r.pending || r.retries != 0 {
		t.Fatalf("in database B after A's token: chunk pending %v with %d retries; want pending with 0", r.pending, r.retries)
	}
	// B's own token for the same chunk works in B, and is unknown in A.
	tokB := reserveN(t, qb, ReserveRequest{})[0].Token
	actOnAll(t, qa, []string{tokB})
	if st, err := qb.Complete(t.Context(), []Completion{{Token: tokB}}); err != nil || st[0] != opsqtype.StatusCompleted {
		t.Fatalf("completing B's token in B: %v, %v; want completed", st, err)
	}
	if r := readChunkRow(t, poolA, id, 0); !r.pending {
		t.Fatal("in database A: the chunk was completed by B's token; want it pending")
	}
}

// TestRotationKeepsLiveTokensValid: after sql/admin/rotate_cluster_key.sql, the instance
// verifies the new key at once (told by NOTIFY, well before its periodic reload) and signs
// with it once it is tokens.KeyActivation old; tokens signed before keep working, on any
// instance, and stop verifying once tokens.KeyOverlap has passed since the rotation.
func TestRotationKeepsLiveTokensValid(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	id := submitN(t, q, 5, NewSubmission{})
	before := reserveN(t, q, ReserveRequest{Max: 2})
	if len(before) != 2 {
		t.Fatalf("reserved %d chunks; want 2", len(before))
	}
	for _, c := range before {
		if keyOf(c) != 1 {
			t.Fatalf("before the rotation, a token signed with key %d; want 1", keyOf(c))
		}
	}
	rotate(t, pool)
	pgtest.Eventually(t, tokens.KeyRefreshInterval/3, "the instance verifies key 2 after the rotation (on the NOTIFY)", func() bool {
		return q.keys.Verify(2, []byte("m"), macUnder(t, pool, 2, []byte("m")))
	})
	// Key 2 verifies at once, but signs only once every instance has loaded it.
	if c := reserveN(t, q, ReserveRequest{Max: 1})[0]; keyOf(c) != 1 {
		t.Fatalf("just after the rotation, a token signed with key %d; want 1 (key 2 is not %v old)", keyOf(c), tokens.KeyActivation)
	}
	age(t, q, pool, 2, tokens.KeyActivation+time.Second)
	after := reserveN(t, q, ReserveRequest{Max: 1})[0]
	if keyOf(after) != 2 {
		t.Fatalf("%v after the rotation, a token signed with key %d; want 2", tokens.KeyActivation, keyOf(after))
	}
	// Another instance started now verifies both keys' tokens too.
	q2 := startQueuer(t, pool)
	st, err := q2.Complete(t.Context(), []Completion{{Token: before[0].Token}, {Token: after.Token}})
	if err != nil || st[0] != opsqtype.StatusCompleted || st[1] != opsqtype.StatusCompleted {
		t.Fatalf("completing a token of each key after the rotation: %v, %v; want completed twice", st, err)
	}
	ext, err := q.Extend(t.Context(), []string{before[1].Token}, time.Minute, false)
	if err != nil || ext[0].Status != opsqtype.StatusExtended {
		t.Fatalf("extending a token of the old key after the rotation: %+v, %v; want extended", ext, err)
	}

	// tokens.KeyOverlap after the rotation, the old key no longer verifies.
	age(t, q, pool, 2, tokens.KeyOverlap+time.Second)
	old := before[1]
	actOnAll(t, q, []string{old.Token})
	if r := readChunkRow(t, pool, id, old.ChunkIndex); !r.pending || r.retries != 0 {
		t.Fatalf("after the old key's token, past the overlap: chunk pending %v with %d retries; want pending with 0", r.pending, r.retries)
	}
	if _, ok := q.reserver.Get(old.Token); !ok {
		t.Fatal("the reservation of the old key's token is gone; want it held (until its lease runs out)")
	}
	// q2 may have taken some of q's shards meanwhile (the cluster rebalances); stopped, it
	// gives them back, and the last chunk is reserved here whichever shard it is on. A shard
	// q was draining for q2 while it held reservations there comes back at the drain
	// timeout (60 s) at the latest: the wait is past it.
	q2.Stop()
	rest := reserveN(t, q, ReserveRequest{Max: 1, Wait: 90 * time.Second})
	if len(rest) != 1 {
		t.Fatalf("reserving the last chunk: got %d chunks in 90s; want 1", len(rest))
	}
	next := rest[0]
	if st, err := q.Complete(t.Context(), []Completion{{Token: next.Token}}); err != nil || st[0] != opsqtype.StatusCompleted {
		t.Fatalf("completing a token of the new key: %v, %v; want completed", st, err)
	}
}

// keyOf is the id of the key that signed c's token.
func keyOf(c Chunk) int {
	tok, _ := tokens.Parse(c.Token)
	return tok.KeyID()
}

// macUnder makes the MAC of msg under key id of the database, as an instance would.
func macUnder(t *testing.T, pool *pgxpool.Pool, id int, msg []byte) []byte {
	t.Helper()
	var s []byte
	if err := pool.QueryRow(t.Context(), "SELECT secret FROM opsq.cluster_keys WHERE id = $1", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	_, mac := tokens.NewStaticKeyring(s).Sign(func(int) []byte { return msg })
	return mac
}

// age makes key id as old as d (moving its creation back in the database), and q reload
// the keys: the rotation's timings without waiting for them.
func age(t *testing.T, q *Queuer, pool *pgxpool.Pool, id int, d time.Duration) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), "UPDATE opsq.cluster_keys SET created_at = now() - make_interval(secs => $1) WHERE id = $2",
		d.Seconds(), id); err != nil {
		t.Fatal(err)
	}
	if err := q.keys.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestStaleCompletionReleasesTheHold: a stale token's completion (a failed attempt's token,
// completing after the chunk was reserved again) completes the chunk and ends the live
// reservation: its max_simultaneous hold goes with it, so the value's slot is free.
func TestStaleCompletionReleasesTheHold(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	sub := sm(`{"company_id": 1}`)
	sub.Lifecycle = retryAtOnce
	submitN(t, q, 2, sub)
	const tree = "max_simultaneous(company_id, 1, oldest_first)"
	holds := func() int64 { return pgtest.Count(t, pool, "SELECT count(*) FROM opsq.simultaneous_holds") }
	first := reserveText(t, q, tree, 1)[0]
	if n := holds(); n != 1 {
		t.Fatalf("%d holds after a reserve; want 1", n)
	}
	if st, err := q.Fail(t.Context(), []Failure{{Token: first.Token, Error: "again", Retry: true}}); err != nil || st[0] != opsqtype.StatusRetrying {
		t.Fatalf("fail with retry: %v, %v; want retrying", st, err)
	}
	again := reserveText(t, q, tree, 1)
	if len(again) != 1 || again[0].ChunkIndex != first.ChunkIndex || again[0].Token == first.Token {
		t.Fatalf("reserving after the retry gave %+v; want chunk %d under a new token", again, first.ChunkIndex)
	}
	if n := holds(); n != 1 {
		t.Fatalf("%d holds after reserving again; want 1", n)
	}
	// The stale token completes first: the first completion wins.
	if st, err := q.Complete(t.Context(), []Completion{{Token: first.Token}}); err != nil || st[0] != opsqtype.StatusCompleted {
		t.Fatalf("completing with the stale token: %v, %v; want completed", st, err)
	}
	if _, ok := q.reserver.Get(again[0].Token); ok {
		t.Fatal("the live reservation is still held after its chunk was completed")
	}
	if n := holds(); n != 0 {
		t.Fatalf("%d max_simultaneous holds left after the chunk was completed by a stale token; want 0", n)
	}
	if c := reserveText(t, q, tree, 1); len(c) != 1 {
		t.Fatalf("reserving the other chunk of the value gave %d chunks; want 1 (the slot is free)", len(c))
	}
}

func firstLine(s string) string { return s[:strings.IndexByte(s, '\n')] }

// TestStaleCompletionsReadTheirStatesInOneQuery: a flush of many valid tokens that complete
// nothing (their chunks finished, or gone) answers them all with one query, with the right
// statuses.
func TestStaleCompletionsReadTheirStatesInOneQuery(t *testing.T) {
	t.Parallel()
	one, many := firstLine(opsqsql.Source("chunk_state.sql")), firstLine(opsqsql.Source("chunk_states.sql"))
	counter := &pgtest.Statements{}
	pool := pgtest.NewTracedPool(t, counter)
	q := startQueuer(t, pool)
	submitN(t, q, 3, NewSubmission{})
	done := reserveN(t, q, ReserveRequest{Max: 2})
	var items []Completion
	for _, c := range done {
		items = append(items, Completion{Token: c.Token})
	}
	if _, err := q.Complete(t.Context(), items); err != nil {
		t.Fatal(err)
	}
	const gone = 10_000
	for range gone { // signed, but of chunks nobody knows (a deleted submission's, say)
		k := reserver.Key{SubmissionID: rand.Int64N(1<<62) + 1, ChunkIndex: rand.Int32N(1000)}
		items = append(items, Completion{Token: tokens.New(k, rand.IntN(q.shardCount), 1, 0).Signed(q.keys).String()})
	}
	start := time.Now()
	st, err := q.Complete(t.Context(), items)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for i, s := range st {
		want := opsqtype.StatusUnknown
		if i < len(done) {
			want = opsqtype.StatusAlreadyFinished
		}
		if s != want {
			t.Fatalf("completion %d: %s; want %s", i, s, want)
		}
	}
	if n := counter.Count(one); n != 0 {
		t.Errorf("the flush read %d chunk states one by one; want none", n)
	}
	if n := counter.Count(many); n != 1 {
		t.Errorf("the flush read the chunk states of its stale tokens with %d queries; want 1", n)
	}
	t.Logf("%d stale completions answered in %v", len(items), took)
}

// TestEveryEndOfAReservationReleasesItsHold: however a reservation under max_simultaneous
// ends (completed, retried, failed, expired, cancelled, or completed by a stale token of
// its chunk), its hold goes with it and its value's slot is free again.
func TestEveryEndOfAReservationReleasesItsHold(t *testing.T) {
	t.Parallel()
	const tree = "max_simultaneous(company_id, 1, oldest_first)"
	for _, tc := range []struct {
		name string
		// lease of the reservation (a minute unless set)
		lease time.Duration
		// end ends the reservation c of submission id.
		end func(t *testing.T, q *Queuer, id int64, c Chunk)
	}{
		{"completed", 0, func(t *testing.T, q *Queuer, _ int64, c Chunk) {
			mustStatus(t, "complete", opsqtype.StatusCompleted)(q.Complete(t.Context(), []Completion{{Token: c.Token}}))
		}},
		{"failed with retry", 0, func(t *testing.T, q *Queuer, _ int64, c Chunk) {
			mustStatus(t, "fail", opsqtype.StatusRetrying)(q.Fail(t.Context(), []Failure{{Token: c.Token, Retry: true}}))
		}},
		{"failed for good", 0, func(t *testing.T, q *Queuer, _ int64, c Chunk) {
			mustStatus(t, "fail", opsqtype.StatusFailed)(q.Fail(t.Context(), []Failure{{Token: c.Token}}))
		}},
		{"expired", time.Second, func(t *testing.T, q *Queuer, _ int64, c Chunk) {
			q.cfg.Clock.(*pgtest.Clock).Add(2 * time.Second)
			pgtest.Eventually(t, 20*time.Second, "the reservation of a 1 s lease expires", func() bool {
				_, held := q.reserver.Get(c.Token)
				return !held
			})
		}},
		{"cancelled", 0, func(t *testing.T, q *Queuer, id int64, _ Chunk) {
			if _, err := q.Cancel(t.Context(), id); err != nil {
				t.Fatal(err)
			}
		}},
		{"completed by a stale token", 0, func(t *testing.T, q *Queuer, _ int64, c Chunk) {
			stale := tokens.New(reserver.Key{SubmissionID: c.SubmissionID, ChunkIndex: c.ChunkIndex}, 0, 0, 0)
			tok, _ := tokens.Parse(c.Token)
			stale.Shard, stale.Generation, stale.Retries = tok.Shard, tok.Generation, tok.Retries
			mustStatus(t, "complete", opsqtype.StatusCompleted)(q.Complete(t.Context(), []Completion{{Token: stale.Signed(q.keys).String()}}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, pool, _ := setupClock(t)
			zero := 0
			sub := sm(`{"company_id": 1}`)
			sub.MaxRetries = &zero
			if tc.name == "failed with retry" || tc.name == "expired" {
				sub.MaxRetries = nil
			}
			id := submitN(t, q, 2, sub)
			other := submitN(t, q, 1, sm(`{"company_id": 1}`)) // to show the slot is free
			lease := cmp.Or(tc.lease, time.Minute)
			c := reserveN(t, q, ReserveRequest{Max: 1, Lease: lease, Strategy: parseStrategy(t, tree)})
			if len(c) != 1 || c[0].SubmissionID != id {
				t.Fatalf("reserve gave %+v; want a chunk of %d", c, id)
			}
			if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.simultaneous_holds"); n != 1 {
				t.Fatalf("%d holds after the reserve; want 1", n)
			}
			tc.end(t, q, id, c[0])
			if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.simultaneous_holds"); n != 0 {
				t.Fatalf("%d holds after the reservation ended; want 0", n)
			}
			got := reserveN(t, q, ReserveRequest{Max: 1, Strategy: parseStrategy(t, tree)})
			if len(got) != 1 {
				t.Fatalf("after the reservation ended, a reserve of company 1 gave %d chunks; want 1 (its slot free; %d waits)", len(got), other)
			}
		})
	}
}

// mustStatus checks the one status of a complete or fail.
func mustStatus(t *testing.T, what string, want opsqtype.TokenStatus) func([]opsqtype.TokenStatus, error) {
	t.Helper()
	return func(st []opsqtype.TokenStatus, err error) {
		t.Helper()
		if err != nil || len(st) != 1 || st[0] != want {
			t.Fatalf("%s: %v, %v; want %s", what, st, err, want)
		}
	}
}

// oneCharacterChanges returns every token that differs from tok in one character, taken
// from the base64url alphabet.
func oneCharacterChanges(tok string) []string {
	const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var out []string
	for i := range len(tok) {
		for _, c := range []byte(base64url) {
			if c != tok[i] {
				out = append(out, tok[:i]+string(c)+tok[i+1:])
			}
		}
	}
	return out
}

// connect connects to dbURL until the test ends.
func connect(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// rotate runs the operators' recipe sql/admin/rotate_cluster_key.sql.
func rotate(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	script, err := fs.ReadFile(opsqsql.Admin, "admin/rotate_cluster_key.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), opsqsql.RecipeStatement(string(script))); err != nil {
		t.Fatalf("running rotate_cluster_key.sql: %v", err)
	}
}
