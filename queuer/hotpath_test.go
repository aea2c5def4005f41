package queuer

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// The hot path under a budget: the statements one reserve of 50 chunks and one complete
// of 50 send to PostgreSQL, for the plain workload (one submission, no tenants, quotas,
// on_failure, backoff, rate_limit, weighted_fair, throttles or traceparent; strategy
// random), and the round trips they take. A feature that adds a statement or a round trip
// to either fails this test, naming it: if it belongs there, pin the new count here and
// say why in the commit.

// hotPathWant is today's pinned statements of each measured call, by name: the sql/*.sql
// file whose text was sent, or "candidates" for a query compiled by strategy.
// Sorted, as the test compares them. Measured on the second round (the first warms), each
// round one fresh submission of 50 chunks, on the test database's shards:
//   - reserve 50: the candidate queries of a reserve whose buffer is empty (16 today, over
//     the shards the one instance holds), and submission_info.sql, since the submission is
//     new to the path's cache;
//   - complete 50: one flush of the completer, in one transaction; these 50 are the
//     submission's last, so submissions_finish_completed.sql runs too, and the
//     submission's finished NOTIFY besides the progress one. Its round trips: BEGIN,
//     plan_by_key.sql with submissions_lock.sql and holds_exist.sql (no max_simultaneous
//     slot held: the tokens are not sent), chunks_complete.sql with the progress
//     notify.sql, submissions_finish_completed.sql, the finished notify.sql, COMMIT (a
//     batch that finishes no submission takes four).
var hotPathWant = map[string][]string{
	"reserve 50": append(slices.Repeat([]string{"candidates"}, 16), "submission_info.sql"),
	"complete 50": {"BEGIN", "COMMIT", "chunks_complete.sql", "holds_exist.sql", "notify.sql", "notify.sql", "plan_by_key.sql",
		"submissions_finish_completed.sql", "submissions_lock.sql"},
}

// hotPathRoundTrips are the round trips of each measured call, as hotPathWant says.
var hotPathRoundTrips = map[string]int{"reserve 50": 17, "complete 50": 6}

// The measured calls do not carry the caller's context to the database: the candidate
// scans run under the reserve path's own context, and a complete is flushed by the
// completer's goroutine while the caller waits. So the tracer records every statement
// sent while a measured call runs (on the pool the Queuer was given and on the candidate
// pool, which copies its config and so its tracer), and drops those of the background
// loops by name (hotPathBackground), with the BEGIN and COMMIT of a transaction of theirs
// (a background loop's transaction, such as the promoter's, may run meanwhile).
type hotPathTracer struct {
	mu         sync.Mutex
	recording  bool
	sent       []sentStatement
	names      map[string]string // statement text → file name
	batchStart *pgx.Conn         // a batch began on it, its first statement not yet recorded
}

// sentStatement is one statement recorded, on the connection that sent it.
type sentStatement struct {
	conn       *pgx.Conn
	name       string
	background bool
	// roundTrip: the statement went alone, or first of a batch (a pipeline of statements
	// sent in one round trip, pgx.Batch).
	roundTrip bool
}

// hotPathBackground are the name prefixes of the statements of the background loops
// (claims, settings, promoter, statistics, activity, keys, schedules, dependencies): never
// part of a request.
var hotPathBackground = []string{"claims_", "claim_", "settings_", "instance", "activity", "consumer_activity",
	"chunks_promote", "chunks_stats_stale", "chunks_analyze", "cluster_keys", "throttles_load", "holds_collect",
	"schedule", "database_now", "dependents_", "unknown: LISTEN"}

// start begins recording.
func (tr *hotPathTracer) start() {
	tr.mu.Lock()
	tr.recording, tr.sent = true, nil
	tr.mu.Unlock()
}

var (
	_ pgx.QueryTracer = (*hotPathTracer)(nil)
	_ pgx.BatchTracer = (*hotPathTracer)(nil)
)

func (tr *hotPathTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	tr.record(conn, data.SQL, true)
	return ctx
}

func (tr *hotPathTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart notes that the next statement recorded on conn begins a round trip.
func (tr *hotPathTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	tr.mu.Lock()
	tr.batchStart = conn
	tr.mu.Unlock()
	return ctx
}

func (tr *hotPathTracer) TraceBatchQuery(_ context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	tr.mu.Lock()
	first := tr.batchStart == conn
	if first {
		tr.batchStart = nil
	}
	tr.mu.Unlock()
	tr.record(conn, data.SQL, first)
}

func (tr *hotPathTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// record records a statement sent on conn, when recording.
func (tr *hotPathTracer) record(conn *pgx.Conn, sql string, roundTrip bool) {
	name := tr.name(sql)
	background := false
	for _, p := range hotPathBackground {
		background = background || strings.HasPrefix(name, p)
	}
	tr.mu.Lock()
	if tr.recording {
		tr.sent = append(tr.sent, sentStatement{conn: conn, name: name, background: background, roundTrip: roundTrip})
	}
	tr.mu.Unlock()
}

// name names a statement's text: its sql/*.sql file, "candidates" for strategy's, else
// its first 60 characters.
func (tr *hotPathTracer) name(sql string) string {
	if n, ok := tr.names[statementKey(sql)]; ok {
		return n
	}
	if strings.Contains(sql, "random_order") || strings.Contains(sql, "opsq.chunks") && strings.Contains(sql, "ORDER BY") {
		return "candidates"
	}
	first := strings.Join(strings.Fields(sql), " ")
	switch strings.ToLower(first) {
	case "begin", "commit", "rollback":
		return strings.ToUpper(first)
	}
	return "unknown: " + first[:min(len(first), 60)]
}

// take stops recording and returns what was recorded, sorted, without the background
// loops' statements and the transactions they ran in (on each connection, from a BEGIN to
// its COMMIT or ROLLBACK), and the round trips those statements took.
func (tr *hotPathTracer) take() (names []string, roundTrips int) {
	tr.mu.Lock()
	sent := tr.sent
	tr.recording, tr.sent = false, nil
	tr.mu.Unlock()
	var out []string
	open := map[*pgx.Conn][]sentStatement{} // each connection's transaction under way
	add := func(s sentStatement) {
		out = append(out, s.name)
		if s.roundTrip {
			roundTrips++
		}
	}
	keep := func(txn []sentStatement) {
		if !slices.ContainsFunc(txn, func(s sentStatement) bool { return s.background }) {
			for _, s := range txn {
				add(s)
			}
		}
	}
	for _, s := range sent {
		txn, inTxn := open[s.conn]
		switch {
		case s.name == "BEGIN":
			open[s.conn] = []sentStatement{s}
		case inTxn && (s.name == "COMMIT" || s.name == "ROLLBACK"):
			keep(append(txn, s))
			delete(open, s.conn)
		case inTxn:
			open[s.conn] = append(txn, s)
		case !s.background:
			add(s)
		}
	}
	for _, txn := range open { // still open when the call returned: kept as far as it went
		keep(txn)
	}
	slices.Sort(out)
	return out, roundTrips
}

// statementParam is a statement's parameter: @name as written, $n as pgx sends the
// statements of a batch (it rewrites their named arguments before tracing them).
var statementParam = regexp.MustCompile(`@[a-z_0-9]+|\$[0-9]+`)

// statementKey is a statement's text with its parameters unnamed, as statementNames keys it.
func statementKey(sql string) string {
	return statementParam.ReplaceAllString(strings.TrimSpace(sql), "?")
}

// statementNames maps the text of every sql/*.sql statement to its file name.
func statementNames(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "sql", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("listing ../sql/*.sql: %v (%d files)", err, len(files))
	}
	names := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f)
		names[statementKey(opsqsql.Source(name))] = name
	}
	return names
}

func TestHotPathStatements(t *testing.T) {
	t.Parallel()
	tr := &hotPathTracer{names: statementNames(t)}
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tr // the candidate pool copies this pool's config, tracer and all
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := startQueuer(t, pool)
	ctx := t.Context()
	req := ReserveRequest{Max: 50, Lease: time.Minute, Strategy: strategy.Default}

	// round reserves and completes all 50 chunks of a fresh submission, recording the
	// statements of the reserve and of the complete. A submission of exactly 50 leaves
	// the reserve path's buffer empty after it, so that each round's reserve reads the
	// database: the reserve of a consumer whose buffer ran dry, the costly case.
	type sent struct {
		names      []string
		roundTrips int
	}
	round := func() (reserve, complete sent) {
		submitN(t, q, 50, NewSubmission{})
		tr.start()
		chunks, err := q.Reserve(ctx, req)
		reserve.names, reserve.roundTrips = tr.take()
		if err != nil {
			t.Fatal(err)
		}
		if len(chunks) != 50 {
			t.Fatalf("reserve max 50: got %d chunks; want 50", len(chunks))
		}
		items := make([]Completion, len(chunks))
		for i, c := range chunks {
			items[i] = Completion{Token: c.Token, Output: []byte("out")}
		}
		tr.start()
		status, err := q.Complete(ctx, items)
		complete.names, complete.roundTrips = tr.take()
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range status {
			if st != wire.StatusCompleted {
				t.Fatalf("completion %d: %s; want completed", i, st)
			}
		}
		return reserve, complete
	}
	round() // the first opens connections, prepares statements and fills caches
	reserve, complete := round()
	for _, tc := range []struct {
		call string
		got  sent
	}{{"reserve 50", reserve}, {"complete 50", complete}} {
		want := hotPathWant[tc.call]
		if got := tc.got.names; !slices.Equal(got, want) {
			t.Errorf("%s sent %d statements %q; want %d %q: new %q, gone %q",
				tc.call, len(got), got, len(want), want, missing(got, want), missing(want, got))
		}
		if got, want := tc.got.roundTrips, hotPathRoundTrips[tc.call]; got != want {
			t.Errorf("%s took %d round trips; want %d", tc.call, got, want)
		}
	}
}

// missing returns the items of a that b does not have (counting repeats).
func missing(a, b []string) []string {
	left := map[string]int{}
	for _, s := range b {
		left[s]++
	}
	var out []string
	for _, s := range a {
		if left[s] > 0 {
			left[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestCompleteByRowAddress: a reservation keeps where its chunk's row was read (its
// ctid), and the completer of the instance that holds it deletes the row by that address
// (sql.RowAddr); a row moved since (here half of them, by an update) is completed by key
// instead, once, like every other.
func TestCompleteByRowAddress(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	q := startQueuer(t, pool)
	ctx := t.Context()
	const n = 40
	id := submitN(t, q, n, NewSubmission{})
	chunks, err := q.Reserve(ctx, ReserveRequest{Max: n, Lease: time.Minute, Strategy: strategy.Default})
	if err != nil || len(chunks) != n {
		t.Fatalf("reserve %d: %d chunks, %v", n, len(chunks), err)
	}
	items := make([]Completion, n)
	for i, c := range chunks {
		res, ok := q.reserver.Get(c.Token)
		if !ok {
			t.Fatalf("chunk %d: no reservation for its token", c.ChunkIndex)
		}
		var row opsqsql.RowAddr
		if err := pool.QueryRow(ctx, `SELECT ctid FROM opsq.chunks WHERE submission_id = $1 AND chunk_index = $2`,
			res.Key.SubmissionID, res.Key.ChunkIndex).Scan(&row); err != nil {
			t.Fatal(err)
		}
		if row == 0 || opsqsql.RowAddr(res.Row) != row {
			t.Errorf("chunk %d: its reservation says its row is at %d; it is at %d", res.Key.ChunkIndex, res.Row, row)
		}
		items[i] = Completion{Token: c.Token, Output: []byte("out")}
	}
	if _, err := pool.Exec(ctx, `UPDATE opsq.chunks SET input = input WHERE submission_id = $1 AND chunk_index % 2 = 0`, id); err != nil {
		t.Fatal(err)
	}
	status, err := q.Complete(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range status {
		if st != wire.StatusCompleted {
			t.Errorf("completion %d: %s; want completed", i, st)
		}
	}
	var done, left, stored int
	if err := pool.QueryRow(ctx, `SELECT (SELECT chunks_done FROM opsq.submissions_completed WHERE id = $1),
		(SELECT count(*) FROM opsq.chunks WHERE submission_id = $1),
		(SELECT count(*) FROM opsq.completed_batches, unnest(chunk_indexes) WHERE submission_id = $1)`, id).Scan(&done, &left, &stored); err != nil {
		t.Fatal(err)
	}
	if done != n || left != 0 || stored != n {
		t.Errorf("after completing %d chunks, %d moved: %d counted done, %d left pending, %d outputs stored; want %d, 0, %d", n, n/2, done, left, stored, n, n)
	}
}
