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
	rows   map[string]int64 // rows returned or affected, by text (the command tags)
}

// CandidateColumns is in the text of every candidate query (sql/candidates_*.sql, as
// strategy.CandidateQuery binds them), and of no other statement: over one shard the query
// begins with it, over several each shard's branch does (so a count by prefix misses those).
const CandidateColumns = "SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base"

// statementText is the context key under which TraceQueryStart leaves a statement's text
// for TraceQueryEnd.
type statementText struct{}

var _ pgx.QueryTracer = (*Statements)(nil)

// TraceQueryStart implements pgx.QueryTracer.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byText == nil {
		s.byText = map[string]int64{}
	}
	s.byText[d.SQL]++
	return context.WithValue(ctx, statementText{}, d.SQL)
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *Statements) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	text, ok := ctx.Value(statementText{}).(string)
	if !ok || d.Err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[string]int64{}
	}
	s.rows[text] += d.CommandTag.RowsAffected()
}

// Containing is how many statements ran whose text contains part, and how many rows they
// returned (or changed) in all, by their command tags.
func (s *Statements) Containing(part string) (statements, rows int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for text, c := range s.byText {
		if strings.Contains(text, part) {
			statements += c
			rows += s.rows[text]
		}
	}
	return statements, rows
}

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
