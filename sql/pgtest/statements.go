package pgtest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Statements counts the statements run on the connections it traces, by their text, so
// that a test can check how many queries some work cost. It is safe for concurrent use.
type Statements struct {
	mu     sync.Mutex
	byText map[string]int64
}

var _ pgx.QueryTracer = (*Statements)(nil)

// TraceQueryStart implements pgx.QueryTracer.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byText == nil {
		s.byText = map[string]int64{}
	}
	s.byText[d.SQL]++
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Total is how many statements ran.
func (s *Statements) Total() int64 { return s.Count("") }

// Count is how many statements ran whose text starts with prefix.
func (s *Statements) Count(prefix string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for text, c := range s.byText {
		if strings.HasPrefix(text, prefix) {
			n += c
		}
	}
	return n
}

// NewTracedPool is NewPool with every statement of the pool counted in s (a pool made from
// its config, such as a queuer's candidate pool, is counted too).
func NewTracedPool(t testing.TB, s *Statements) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDB(t))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.ConnConfig.Tracer = s
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("pgtest: connecting: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
