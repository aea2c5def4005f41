package sql

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSource: Source returns a statement's text as its method sends it, and panics on a
// file that does not exist.
func TestSource(t *testing.T) {
	t.Parallel()
	if got := Source("holds_take.sql"); got != holdsTake {
		t.Errorf("Source(holds_take.sql) = %q; want the text HoldsTake sends, %q", got, holdsTake)
	}
	for _, name := range []string{"nothing.sql", "admin/drain_instance.sql", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Source(%q) did not panic; want a panic", name)
				}
			}()
			Source(name)
		}()
	}
}

// TestStatementsListEveryMethod: Statements lists every exported method of Queries and
// nothing else (var _ Statements = Queries{} checks only the one way).
func TestStatementsListEveryMethod(t *testing.T) {
	t.Parallel()
	methods := func(typ reflect.Type) []string {
		var names []string
		for m := range typ.Methods() {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		return names
	}
	queries, listed := methods(reflect.TypeFor[Queries]()), methods(reflect.TypeFor[Statements]())
	for _, name := range queries {
		if !slices.Contains(listed, name) {
			t.Errorf("Queries.%s is not listed in Statements (statements.go)", name)
		}
	}
	if len(listed) != len(queries) {
		t.Errorf("Statements lists %d methods; Queries has %d", len(listed), len(queries))
	}
}

// TestEveryStatementUnexported: each statement file is embedded in an unexported
// variable of its own, and no exported variable of the package is a string, so that a
// statement is reached only through its method.
func TestEveryStatementUnexported(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	embedded := map[string]string{} // statement file → variable
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for _, id := range vs.Names {
					if typ, ok := vs.Type.(*ast.Ident); ok && typ.Name == "string" && id.IsExported() {
						t.Errorf("%s: exported string variable %s: a statement's text must stay unexported", name, id.Name)
					}
				}
				if gen.Doc == nil {
					continue
				}
				for _, c := range gen.Doc.List {
					pattern, ok := strings.CutPrefix(c.Text, "//go:embed ")
					if !ok || strings.ContainsAny(pattern, "*/") { // the FSes: sources, Admin
						continue
					}
					if v := vs.Names[0].Name; ast.IsExported(v) {
						t.Errorf("%s: %s embeds %s exported; want it unexported, run by its method", name, v, pattern)
					} else if other, dup := embedded[pattern]; dup {
						t.Errorf("%s is embedded twice, in %s and %s", pattern, other, v)
					} else {
						embedded[pattern] = v
					}
				}
			}
		}
	}
	stmts, err := fs.Glob(sources, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if _, ok := embedded[s]; !ok {
			t.Errorf("%s is embedded in no variable of its own; want one beside the method that runs it", s)
		}
	}
	if len(embedded) != len(stmts) {
		t.Errorf("%d variables embed a statement; want %d, one per file", len(embedded), len(stmts))
	}
}
