// Package queuertest starts queuers and builds backlogs for the tests of the packages that
// use queuer from outside (api, strategy's plan tests). It is the queuer half of the test
// kit; the database half, which queuer's own tests use too (they cannot import this
// package: it imports queuer), is sql/pgtest.
//
// A package that uses it calls pgtest.Main or pgtest.Wrap from its TestMain.
package queuertest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/submissions"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// AdvertiseURL is the address a test queuer advertises to its peers: nothing listens
// there, so a forward to it fails at once.
const AdvertiseURL = "http://127.0.0.1:1"

var instanceSeq atomic.Int64

// Start starts a queuer with cfg and stops it when the test ends. A nil cfg.Pool gets a
// fresh database (pgtest.NewPool), an empty cfg.Instance.ID a name unique in the test
// binary, an empty cfg.Instance.AdvertiseURL AdvertiseURL, a nil cfg.Logger one that
// writes warnings and errors to the test's output (pgtest.Logger). The claim timings are those of
// the database: set them with pgtest.SetTimings before Start.
func Start(t testing.TB, cfg queuer.Config) *queuer.Queuer {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = pgtest.NewPool(t)
	}
	if cfg.Instance.ID == "" {
		cfg.Instance.ID = fmt.Sprintf("test-%d", instanceSeq.Add(1))
	}
	if cfg.Instance.AdvertiseURL == "" {
		cfg.Instance.AdvertiseURL = AdvertiseURL
	}
	if cfg.Logger == nil {
		cfg.Logger = pgtest.Logger(t, slog.LevelWarn)
	}
	q, err := queuer.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("queuertest: %v", err)
	}
	if err := q.Start(t.Context()); err != nil {
		t.Fatalf("queuertest: starting queuer %s: %v", cfg.Instance.ID, err)
	}
	t.Cleanup(q.Stop)
	return q
}

// Strategy parses a strategy's text form, failing the test if it does not parse.
func Strategy(t testing.TB, text string) strategy.Node {
	t.Helper()
	n, err := strategy.ParseText(text)
	if err != nil {
		t.Fatalf("queuertest: strategy %q: %v", text, err)
	}
	return n
}

// Submission is one submission of a backlog: its chunks all hold Input.
type Submission struct {
	ID                int64
	Chunks            int
	Priority          int
	MaxRetries        int
	StrategicMetadata map[string]any // a JSON object
	Input             []byte
}

// LoadBacklog writes subs and their chunks through queuer.SubmitMany (one transaction,
// the chunks by COPY: far quicker than Submit for a backlog of hundreds of thousands of
// chunks, and the same rows Submit writes), then ANALYZEs the tables. The ids in subs
// must not collide with those the queuer makes (any below queuer's id epoch are safe).
func LoadBacklog(t testing.TB, pool *pgxpool.Pool, subs []Submission) {
	t.Helper()
	ctx := t.Context()
	small := make([]submissions.SmallSubmission, len(subs))
	for i, s := range subs {
		if s.StrategicMetadata == nil {
			s.StrategicMetadata = map[string]any{}
		}
		meta, err := json.Marshal(s.StrategicMetadata)
		if err != nil {
			t.Fatalf("queuertest: submission %d: %v", s.ID, err)
		}
		chunks := make([][]byte, s.Chunks)
		for c := range chunks {
			chunks[c] = s.Input
		}
		small[i] = submissions.SmallSubmission{ID: s.ID, StrategicMetadata: meta, Priority: int64(s.Priority),
			MaxRetries: &subs[i].MaxRetries, Chunks: chunks}
	}
	at := func(i int64) submissions.SmallSubmission { return small[i] }
	if err := submissions.SubmitMany(ctx, pool, int64(len(small)), at, nil); err != nil {
		t.Fatalf("queuertest: loading the backlog: %v", err)
	}
	for _, table := range []string{"chunks", "submissions", "strategic_metadata"} {
		if _, err := pool.Exec(ctx, "ANALYZE opsq."+table); err != nil {
			t.Fatalf("queuertest: %v", err)
		}
	}
}

// Listen hands the payloads of NOTIFYs on each channel of channels to its function, on a
// LISTEN connection of its own, as an instance's one LISTEN connection does for the parts
// that share it (queuer.Config.Notified), until the test ends.
func Listen(t testing.TB, pool *pgxpool.Pool, channels map[string]func(payload string)) {
	t.Helper()
	l := notify.NewListener(pool, pgtest.Logger(t, slog.LevelWarn), &notify.Bus{}, channels, nil)
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
}
