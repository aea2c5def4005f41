package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/sql/pgtest"
)

// requestTracer records the texts of the statements sent for requests marked by its
// handler (background loops are not), while it records.
type requestTracer struct {
	mu        sync.Mutex
	recording bool
	sent      []string
}

type requestMark struct{}

var _ pgx.QueryTracer = (*requestTracer)(nil)

func (tr *requestTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(requestMark{}) == nil {
		return ctx
	}
	tr.mu.Lock()
	if tr.recording {
		tr.sent = append(tr.sent, strings.Join(strings.Fields(d.SQL), " "))
	}
	tr.mu.Unlock()
	return ctx
}

func (tr *requestTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// mark marks each request's context, so that its statements are recorded.
func (tr *requestTracer) mark(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestMark{}, true)))
	})
}

// record returns the statements that fn's requests sent.
func (tr *requestTracer) record(fn func()) []string {
	tr.mu.Lock()
	tr.recording, tr.sent = true, nil
	tr.mu.Unlock()
	fn()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.recording = false
	return tr.sent
}

// TestAnotherTenantsIDCostsAnUnknownOnes: every producer route on an id of another tenant
// sends the same statements as on an unknown id, so that not even the time of the 404 tells
// that the id exists (issue 31, finding 10: another tenant's id, once its tenant was
// cached, was answered from memory in 0.2 ms; an unknown id read the database, 0.45 ms).
func TestAnotherTenantsIDCostsAnUnknownOnes(t *testing.T) {
	t.Parallel()
	tr := &requestTracer{}
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	a := setupAuthOn(t, Config{}, pool, tr.mark)
	theirs := a.submit(t, a.key["producer2"])
	// Their owner reads it: its tenant is now in the instance's cache.
	if r := a.call(t, a.key["producer2"], http.MethodGet, "/v1/submissions/"+theirs, ""); r.Status != http.StatusOK {
		t.Fatalf("the owner reading %s: %d %s", theirs, r.Status, r.Body)
	}
	unknown := "999"
	for _, r := range submissionIDRoutes {
		for _, who := range []string{"producer", "consumer2"} {
			if who == "consumer2" && !r.consumers {
				continue // not a consumer's route: 403 whatever the id
			}
			id := theirs
			if who == "consumer2" { // beta only: the default tenant's id is another tenant's
				id = a.submit(t, a.key["producer"])
			}
			send := func(id string) []string {
				return tr.record(func() {
					got := a.call(t, a.key[who], r.method, strings.Replace(r.path, "%s", id, 1), r.body)
					expectError(t, got, http.StatusNotFound, "not_found")
				})
			}
			send(id) // a first time, as an attacker may
			foreign, none := send(id), send(unknown)
			if len(none) == 0 {
				t.Errorf("%s %s with %s on an unknown id sent no statement; want the tenant's lookup", r.method, r.path, who)
			}
			if !slices.Equal(foreign, none) {
				t.Errorf("%s %s with %s: another tenant's id sent %q; an unknown id %q: want the same statements", r.method, r.path, who, foreign, none)
			}
		}
	}
}
