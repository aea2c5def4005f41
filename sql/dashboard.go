package sql

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The dashboard (api/ui).

//go:embed dashboard_overview.sql
var DashboardOverview string

// DashboardOverviewParams are dashboard_overview.sql's.
type DashboardOverviewParams struct {
	Since *time.Time // nil: DoneFinishedSince is 0
}

// DashboardOverviewRow is the dashboard's own part of its overview.
type DashboardOverviewRow struct {
	DoneInProgress    int64      `db:"done_in_progress"`
	FailedLastHour    int64      `db:"failed_last_hour"`
	DoneFinishedSince int64      `db:"done_finished_since"`
	OldestID          *int64     `db:"oldest_id"`
	OldestCreatedAt   *time.Time `db:"oldest_created_at"`
	Now               time.Time  `db:"now"`
}

// DashboardOverview reads the dashboard's own figures.
func (q Queries) DashboardOverview(ctx context.Context, p DashboardOverviewParams) (DashboardOverviewRow, error) {
	return collectOne[DashboardOverviewRow](ctx, q.db, DashboardOverview, pgx.NamedArgs{"since": p.Since})
}

//go:embed dashboard_retries.sql
var DashboardRetries string

// The operators' recipes the dashboard runs, as pgx statements: the same files an operator
// runs with psql (admin/*.sql), their psql variables turned into named arguments, so that
// the buttons of the dashboard and the recipes cannot drift apart.
var (
	AdminDrainInstance   = mustAdminStatement("drain_instance.sql")   // @instance
	AdminUndrainInstance = mustAdminStatement("undrain_instance.sql") // @instance
	AdminDisableShard    = mustAdminStatement("disable_shard.sql")    // @shard
	AdminEnableShard     = mustAdminStatement("enable_shard.sql")     // @shard
)

func mustAdminStatement(name string) string {
	s, err := AdminStatement(name)
	if err != nil {
		panic(err)
	}
	return s
}

// AdminStatement returns the recipe admin/name as a statement for pgx: its comments left
// out, and its psql variables — :'name' (a quoted literal) and :name (the text itself) —
// turned into named arguments @name, bound as values. Quoted strings and :: casts are
// kept as they are.
func AdminStatement(name string) (string, error) {
	script, err := Admin.ReadFile("admin/" + name)
	if err != nil {
		return "", err
	}
	return psqlToNamed(string(script))
}

// psqlToNamed turns psql variables into pgx named arguments (see AdminStatement).
func psqlToNamed(script string) (string, error) {
	s, err := PsqlVariables(script, false, func(name string, _ bool) (string, error) { return "@" + name, nil })
	return strings.TrimSpace(s), err
}

// PsqlVariables reads script as psql reads its variables, and replaces each — :'name' (a
// quoted literal: quoted true) and :name (the text itself) — with what replace returns for
// it. Quoted strings and :: casts are left as they are, and so are comments when
// keepComments (else they are left out). The one reader of this syntax: AdminStatement
// makes bound statements of the recipes with it, and the recipes' tests (claims) run
// them as psql would, with values.
func PsqlVariables(script string, keepComments bool, replace func(name string, quoted bool) (string, error)) (string, error) {
	identChar := func(c byte) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	var b strings.Builder
	for i := 0; i < len(script); {
		rest := script[i:]
		switch {
		case strings.HasPrefix(rest, "--"):
			end := strings.IndexByte(rest, '\n')
			if end < 0 {
				end = len(rest)
			}
			if keepComments {
				b.WriteString(rest[:end])
			}
			i += end
		case rest[0] == '\'':
			end := 1
			for end < len(rest) {
				if rest[end] == '\'' {
					if end+1 < len(rest) && rest[end+1] == '\'' {
						end += 2
						continue
					}
					break
				}
				end++
			}
			if end >= len(rest) {
				return "", fmt.Errorf("unterminated quoted string")
			}
			b.WriteString(rest[:end+1])
			i += end + 1
		case strings.HasPrefix(rest, "::"):
			b.WriteString("::")
			i += 2
		case strings.HasPrefix(rest, ":'"):
			end := strings.IndexByte(rest[2:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated :'variable'")
			}
			v, err := replace(rest[2:2+end], true)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += 2 + end + 1
		case rest[0] == ':' && len(rest) > 1 && identChar(rest[1]):
			end := 1
			for end < len(rest) && identChar(rest[end]) {
				end++
			}
			v, err := replace(rest[1:end], false)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += end
		default:
			b.WriteByte(rest[0])
			i++
		}
	}
	return b.String(), nil
}
