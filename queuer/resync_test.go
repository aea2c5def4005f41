package queuer

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/notify"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestMissedNotifyIsReread: what a NOTIFY said while the instance's LISTEN connection was
// down (the primary lost, before the failover) is read again once it is back, so that
// nobody waits for a notification that never came (DESIGN.md §4, "Failover of
// PostgreSQL"). The listener's session is ended and new sessions are refused while the
// NOTIFY that a submission a producer waits on finished goes out, and while this instance
// takes a submission that a parked reserve waits for: both NOTIFYs go to nobody. Once sessions
// are allowed again, the listener reconnects, and the waiter and the reserve get their
// answers long before their waits run out.
func TestMissedNotifyIsReread(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := startQueuer(t, pool)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	// The connection the test works through while the database refuses new sessions: to
	// the server's "postgres" database, since a database cannot refuse sessions from its
	// own.
	cc, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db := cc.Database
	cc.Database = "postgres"
	admin, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	// A producer waits on a submission, a consumer on new work; both waits outlast ctx,
	// so only a wake-up ends them in time.
	waited := submitN(t, q, 3, NewSubmission{})
	type finished struct {
		st  Status
		err error
	}
	waiter := make(chan finished, 1)
	go func() {
		st, err := q.WaitFinished(ctx, waited, time.Minute)
		waiter <- finished{st, err}
	}()
	pgtest.Eventually(t, 20*time.Second, "the producer's wait registers", func() bool { return q.waiting.Waiting() > 0 })
	// The waited submission is completed behind the instance's back, as by another
	// instance whose NOTIFY of it goes out during the gap; and the reserve has nothing to
	// take but what comes next.
	pgtest.CompleteSubmission(t, pool, waited)
	type reservation struct {
		chunks []Chunk
		err    error
	}
	reserved := make(chan reservation, 1)
	go func() {
		chunks, err := q.Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: time.Minute, Strategy: strategy.Default})
		reserved <- reservation{chunks, err}
	}()
	waitParked(t, q, 1)

	// The gap: no new session, and the listener's ended.
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " WITH ALLOW_CONNECTIONS false")
	defer func() {
		_, _ = admin.Exec(context.Background(), "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" WITH ALLOW_CONNECTIONS true")
	}()
	var ended int
	if err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
		FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN %'`, db).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended == 0 {
		t.Fatal("found no LISTEN session of the instance to end")
	}
	// Announced during the gap: the submission finished (its own NOTIFY), and new work
	// taken by this very instance, which wakes parked reserves only through its NOTIFY.
	notifier, err := pool.Acquire(ctx) // a session opened before the gap
	if err != nil {
		t.Fatal(err)
	}
	_, err = notifier.Exec(ctx, "SELECT pg_notify($1, $2)", notify.ChannelFinished, strconv.FormatInt(waited, 10))
	notifier.Release()
	if err != nil {
		t.Fatal(err)
	}
	submitN(t, q, 1, NewSubmission{})
	select {
	case f := <-waiter:
		t.Fatalf("the producer's wait ended during the gap (%+v, %v); the test needs it to still wait", f.st, f.err)
	default:
	}
	exec("ALTER DATABASE " + pgx.Identifier{db}.Sanitize() + " WITH ALLOW_CONNECTIONS true")
	back := time.Now()

	select {
	case f := <-waiter:
		if f.err != nil || f.st.State != opsqtype.StateCompleted {
			t.Errorf("the producer's wait answered %s, %v; want completed", f.st.State, f.err)
		}
	case <-ctx.Done():
		t.Fatal("the producer still waits on a submission that finished during the gap")
	}
	select {
	case r := <-reserved:
		if r.err != nil || len(r.chunks) != 1 {
			t.Errorf("the parked reserve got %d chunks, %v; want the one submitted during the gap", len(r.chunks), r.err)
		}
	case <-ctx.Done():
		t.Fatal("the parked reserve still waits for the work submitted during the gap")
	}
	t.Logf("both waits answered %s after sessions were allowed again", time.Since(back).Round(time.Millisecond))
}
