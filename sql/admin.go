package sql

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Admin holds the operators' recipes, admin/*.sql: short commented statements to run with
// psql, taking their arguments as psql variables, for example
//
//	psql "$OPSQ_DATABASE_URL" -v shard=17 -f sql/admin/force_release_shard.sql
//
// Each sets ON_ERROR_STOP, so that psql stops and exits non-zero at the first error, and
// each that changes something fails so too when it changed nothing (an unknown shard,
// instance or key name).
//
//go:embed admin/*.sql
var Admin embed.FS

// The operators' recipes the dashboard runs, as pgx statements: the same files an operator
// runs with psql (admin/*.sql), their psql variables turned into named arguments, so that
// the buttons of the dashboard and the recipes cannot drift apart.
var (
	adminDrainInstance   = mustAdminStatement("drain_instance.sql")   // @instance
	adminUndrainInstance = mustAdminStatement("undrain_instance.sql") // @instance
	adminDisableShard    = mustAdminStatement("disable_shard.sql")    // @shard
	adminEnableShard     = mustAdminStatement("enable_shard.sql")     // @shard
)

// mustAdminStatement is adminStatement of a recipe that must make one: it panics when the
// recipe does not.
func mustAdminStatement(name string) string {
	s, err := adminStatement(name)
	if err != nil {
		panic(err)
	}
	return s
}

// AdminInstanceParams name the instance of admin/drain_instance.sql and
// admin/undrain_instance.sql.
type AdminInstanceParams struct {
	Instance string
}

// AdminDrainInstance drains instance p.Instance, as admin/drain_instance.sql does, and
// reports whether there is such an instance.
func (q Queries) AdminDrainInstance(ctx context.Context, p AdminInstanceParams) (bool, error) {
	return q.admin(ctx, adminDrainInstance, pgx.NamedArgs{"instance": p.Instance})
}

// AdminUndrainInstance undoes AdminDrainInstance, as admin/undrain_instance.sql does, and
// reports whether there is such an instance.
func (q Queries) AdminUndrainInstance(ctx context.Context, p AdminInstanceParams) (bool, error) {
	return q.admin(ctx, adminUndrainInstance, pgx.NamedArgs{"instance": p.Instance})
}

// AdminShardParams name the shard of admin/disable_shard.sql and admin/enable_shard.sql.
type AdminShardParams struct {
	Shard int
}

// AdminDisableShard disables shard p.Shard and takes it from its owner, as
// admin/disable_shard.sql does, and reports whether there is such a shard.
func (q Queries) AdminDisableShard(ctx context.Context, p AdminShardParams) (bool, error) {
	return q.admin(ctx, adminDisableShard, pgx.NamedArgs{"shard": p.Shard})
}

// AdminEnableShard undoes AdminDisableShard, as admin/enable_shard.sql does, and reports
// whether there is such a shard.
func (q Queries) AdminEnableShard(ctx context.Context, p AdminShardParams) (bool, error) {
	return q.admin(ctx, adminEnableShard, pgx.NamedArgs{"shard": p.Shard})
}

// admin runs a recipe's statement and reports whether it changed a row.
func (q Queries) admin(ctx context.Context, stmt string, args pgx.NamedArgs) (bool, error) {
	tag, err := q.db.Exec(ctx, stmt, args)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// adminStatement returns the recipe admin/name as a statement for pgx: its comments left
// out, and its psql variables — :'name' (a quoted literal) and :name (the text itself) —
// turned into named arguments @name, bound as values. Quoted strings and :: casts are
// kept as they are.
func adminStatement(name string) (string, error) {
	script, err := Admin.ReadFile("admin/" + name)
	if err != nil {
		return "", err
	}
	return psqlToNamed(RecipeStatement(string(script)))
}

// RecipeStatement returns the statement of a recipe (for the dashboard, and for tests that
// run a recipe through pgx): its lines from the first that is neither a comment, blank,
// nor a psql meta-command (\set ON_ERROR_STOP on) to the first that ends with ";". What
// follows it is psql's alone: the check that makes psql fail when the statement changed
// nothing (a \gexec); the dashboard reads the rows affected instead.
func RecipeStatement(script string) string {
	var b strings.Builder
	for line := range strings.Lines(script) {
		trimmed := strings.TrimSpace(line)
		if b.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--") || strings.HasPrefix(trimmed, `\`)) {
			continue
		}
		b.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			break
		}
	}
	return b.String()
}

// psqlToNamed turns psql variables into pgx named arguments (see adminStatement).
func psqlToNamed(script string) (string, error) {
	s, err := PsqlVariables(script, false, func(name string, _ bool) (string, error) { return "@" + name, nil })
	return strings.TrimSpace(s), err
}

// PsqlVariables reads script as psql reads its variables, and replaces each — :'name' (a
// quoted literal: quoted true) and :name (the text itself) — with what replace returns for
// it. Quoted strings and :: casts are left as they are, and so are comments when
// keepComments (else they are left out). The one reader of this syntax: adminStatement
// makes bound statements of the recipes with it (the recipes' tests run them with psql
// itself, pgtest.Psql).
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
