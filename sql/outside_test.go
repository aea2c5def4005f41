package sql

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The database behind package sql alone: outside it, no Go file of the module opens a
// transaction, copies rows or holds a statement's text. What may still, and why (a
// folder ends in "/"):
var outsideAllowed = map[string]string{
	// The bench and the cluster test kit read the database as witnesses of what the engine
	// did (ledgers, counts, backlogs made fast), with statements of their own, so that a
	// bug in sql/ cannot hide from the checks that should catch it.
	"cmd/opsq/bench/":       "the bench's witness statements",
	"cmd/opsq/clustertest/": "the cluster kit's witness statements",
	// goose keeps the schema's version; the check that it is current reads goose's table.
	"migrations/migrations.go": "goose's version table",
	// The tracer of the driver's calls names pgx's COPY hooks.
	"api/tracing/pgx.go": "pgx's CopyFrom tracer",
}

// databaseCall is a call that opens a transaction or copies rows.
var databaseCall = regexp.MustCompile(`\bpgx\.Begin(Tx)?Func\(|\.Begin(Tx)?\(ctx|\.CopyFrom\(`)

// sqlText is a string literal that holds a statement.
var sqlText = regexp.MustCompile(`\b(SELECT .+ FROM|INSERT INTO|UPDATE \S+ SET|DELETE FROM)\b`)

// TestNoDatabaseOutsideSQL scans the module's Go files outside sql/ (tests, and Go modules
// of their own such as the bench's River module, aside).
func TestNoDatabaseOutsideSQL(t *testing.T) {
	t.Parallel()
	root := ".."
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "sql" || (rel != "." && strings.HasPrefix(d.Name(), ".")) || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if _, ok := outsideAllowed[rel]; ok {
			return nil
		}
		if _, ok := outsideAllowed[filepath.ToSlash(filepath.Dir(rel))+"/"]; ok {
			return nil
		}
		scanned++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				call := string(src[fset.Position(n.Pos()).Offset : fset.Position(n.Lparen).Offset+1])
				if databaseCall.MatchString(call) {
					t.Errorf("%s: %s: a transaction or a COPY outside package sql; run it through sql (InTx, InSnapshot, InSerializable, ChunksCopy)", fset.Position(n.Pos()), call)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && sqlText.MatchString(n.Value) {
					t.Errorf("%s: a statement's text outside package sql; put it in a .sql file of sql, run by a method of Queries", fset.Position(n.Pos()))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d Go files outside sql; want the module's (is the test run from sql/?)", scanned)
	}
}
