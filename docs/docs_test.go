// Package docs holds opsq's documentation beside the code and no Go code of its own. Its
// tests keep the docs true to the code: every repository path that README.md and
// docs/*.md name exists, and every Go identifier docs/engine.md, the code map, names
// (handout.Path.Reserve, Queuer.Complete, notify.SendWork) is declared in the module.
// (cmd/opsq's TestDocsLinks checks the links of README.md and docs/*.md;
// TestReadmeWalkthrough runs the README's commands.)
package docs

import (
	"fmt"
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

const (
	root       = ".." // the repository, from this package's folder
	engineDoc  = "engine.md"
	modulePath = "opsq" // go.mod's module: "opsq/api/wire" is the folder api/wire
)

// TestEngineMentions checks every code span of docs/engine.md that names a repository path
// or a Go identifier (see mentions) against the repository as it is.
func TestEngineMentions(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(engineDoc)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := indexModule(root)
	if err != nil {
		t.Fatal(err)
	}
	ms := mentions(string(raw))
	counts := map[kind]int{}
	for _, m := range ms {
		counts[m.kind]++
		if problem := check(root, idx, m); problem != "" {
			t.Errorf("docs/%s:%d: `%s`: %s", engineDoc, m.line, m.text, problem)
		}
	}
	// A doc this test reads wrongly would pass with nothing checked.
	if counts[pathMention] < 20 || counts[identMention] < 15 {
		t.Errorf("docs/%s: checked %d paths and %d dotted identifiers; want at least 20 and 15 (is it still the code map?)",
			engineDoc, counts[pathMention], counts[identMention])
	}
}

// TestDocsPaths checks the repository paths that README.md and the other docs/*.md name in
// code spans: those that start at a top-level folder of the repository (`sql/admin/`,
// `queuer/internal/handout/fair.go`; not `html/template` or `application/x-ndjson`), and
// the file names after them in their paragraphs. The code moves; the prose must follow.
func TestDocsPaths(t *testing.T) {
	t.Parallel()
	idx, err := indexModule(root)
	if err != nil {
		t.Fatal(err)
	}
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	tops := map[string]bool{}
	for _, e := range top {
		if !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	checked := 0
	for _, f := range files {
		if f == engineDoc {
			continue // TestEngineMentions checks it, and more
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mentions(string(raw)) {
			first, _, _ := strings.Cut(repoPath(m.text), "/")
			if m.kind == pathMention && !tops[first] || m.kind != pathMention && m.kind != fileMention {
				continue
			}
			checked++
			if problem := check(root, idx, m); problem != "" {
				t.Errorf("%s:%d: `%s`: %s", rel(f), m.line, m.text, problem)
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked %d paths and file names in README.md and docs/*.md; want at least 50", checked)
	}
}

// rel is a doc's path from the root of the repository.
func rel(f string) string {
	if r, ok := strings.CutPrefix(filepath.ToSlash(f), root+"/"); ok {
		return r
	}
	return "docs/" + f
}

// TestEngineMentionsCatchStale: the check flags what does not exist, and only that.
func TestEngineMentionsCatchStale(t *testing.T) {
	t.Parallel()
	idx, err := indexModule(root)
	if err != nil {
		t.Fatal(err)
	}
	md := strings.Join([]string{
		"# x",
		"`sql/db.go` → `sql.Queries.Notify` and `sql.Queries`; `db.go` beside it; `Queries.Notify`; `sql/admin/`.",
		"```",
		"`no/such/file.go` in a code block is not a mention",
		"```",
		"| `sql` | `db.go`, `retry.go`, `sql.Retry`, `opsq.settings` (a table) |",
		"`sql/no_such_file.go`, `sql.NoSuchThing`, `sql.Queries.NoSuchMethod`, `NoSuchType.Method`",
		"",
		"`db.go`", // no folder named before it in this paragraph: anywhere will do
		"`no_such_file_anywhere.go` and `NoSuchExportedName`, `POST /v1/throttle`, `/ui/`",
		"| `deploy` | `grafana/opsq.json` (in deploy) |",
		"| `api` | `db.go` (not in api) |",
	}, "\n")
	var bad []string
	for _, m := range mentions(md) {
		if check(root, idx, m) != "" {
			bad = append(bad, fmt.Sprintf("%d:%s", m.line, m.text))
		}
	}
	want := "7:sql/no_such_file.go 7:sql.NoSuchThing 7:sql.Queries.NoSuchMethod 7:NoSuchType.Method 10:no_such_file_anywhere.go 10:NoSuchExportedName 12:db.go"
	if got := strings.Join(bad, " "); got != want {
		t.Errorf("flagged %q; want %q", got, want)
	}
}

type kind int

const (
	pathMention  kind = iota // a repository path: `queuer/internal/handout/take.go`, `sql/admin/`
	fileMention              // a file name alone: `take.go`, in a folder named before it
	identMention             // Package.Name, Type.Member or Package.Type.Member
	nameMention              // an exported Go name alone: `NewWork`
)

type mention struct {
	line int
	text string
	kind kind
	dirs []string // the folders named before it in its paragraph, where a file or path may be
}

var (
	pathRE   = regexp.MustCompile(`^[A-Za-z0-9_.*-]+(/[A-Za-z0-9_.*-]+)*/?(/\.\.\.)?$`)
	fileRE   = regexp.MustCompile(`^[A-Za-z0-9_*-]+(\.[A-Za-z0-9_-]+)*\.(go|sql|md|json|yml|yaml|ts|py|toml|mod|png)$`)
	identRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){1,2}$`)
	nameRE   = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
	folderRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// mentions are the code spans of a Markdown text, outside code blocks, that name a path
// (they hold a "/" and no space, and do not start with one: not a route), a file, a dotted
// Go identifier (not opsq.…, the database's tables) or an exported Go name; a trailing "()"
// is dropped. A paragraph ends at a blank line, a heading, a table row or a list item.
func mentions(md string) []mention {
	var out []mention
	var dirs []string
	inBlock := false
	for i, l := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			inBlock = !inBlock
			dirs = nil
			continue
		}
		if inBlock {
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "|") || listItemRE.MatchString(trimmed) {
			dirs = nil
		}
		parts := strings.Split(l, "`")
		for j := 1; j < len(parts)-1; j += 2 { // odd parts are code spans (a last, unclosed one is not)
			s := strings.TrimSuffix(strings.TrimSpace(parts[j]), "()")
			m := mention{line: i + 1, text: s}
			switch {
			case s == "" || strings.ContainsAny(s, " \t") || strings.HasPrefix(s, "/") || strings.Contains(s, "://"):
				continue
			case strings.Contains(s, "/"):
				if !pathRE.MatchString(s) {
					continue
				}
				m.kind = pathMention
				m.dirs = append([]string(nil), dirs...)
				dirs = append(dirs, dirOf(repoPath(s)))
			case folderRE.MatchString(s):
				dirs = append(dirs, s) // a folder's name, perhaps (`sql`, `deploy`): not checked
				continue
			case fileRE.MatchString(s):
				m.kind = fileMention
				m.dirs = append([]string(nil), dirs...)
			case identRE.MatchString(s):
				if strings.HasPrefix(s, "opsq.") {
					continue // a table: opsq.settings
				}
				m.kind = identMention
			case nameRE.MatchString(s) && strings.ToUpper(s) != s: // not OTEL_…, an environment variable
				m.kind = nameMention
			default:
				continue
			}
			out = append(out, m)
		}
	}
	return out
}

var listItemRE = regexp.MustCompile(`^([0-9]+\.|[-*]) `)

// repoPath is a path as the repository holds it: "opsq/api/wire" is api/wire, and
// "queuer/internal/..." (a pattern of packages) is queuer/internal.
func repoPath(s string) string {
	s = strings.TrimSuffix(s, "/...")
	if rest, ok := strings.CutPrefix(s, modulePath+"/"); ok {
		s = rest
	}
	return strings.TrimSuffix(s, "/")
}

// dirOf is the folder a path mention gives the file names after it: itself when it names
// no file (no extension), else its folder.
func dirOf(p string) string {
	if filepath.Ext(p) == "" {
		return p
	}
	return filepath.Dir(p)
}

// check returns what is wrong with a mention, "" when nothing is.
func check(root string, idx *index, m mention) string {
	switch m.kind {
	case pathMention:
		p := repoPath(m.text)
		if exists(filepath.Join(root, p)) {
			return ""
		}
		for _, d := range m.dirs {
			if exists(filepath.Join(root, d, p)) {
				return ""
			}
		}
		return "no such file or folder in the repository"
	case fileMention:
		if len(m.dirs) == 0 {
			if !idx.files[m.text] && !globAnywhere(idx, m.text) {
				return "no file of that name anywhere in the repository"
			}
			return ""
		}
		var folders []string
		for _, d := range m.dirs {
			if exists(filepath.Join(root, d, m.text)) {
				return ""
			}
			if exists(filepath.Join(root, d)) {
				folders = append(folders, d)
			}
		}
		if len(folders) == 0 { // the folders named are stale (and flagged) or no folders
			if !idx.files[m.text] && !globAnywhere(idx, m.text) {
				return "no file of that name anywhere in the repository"
			}
			return ""
		}
		return fmt.Sprintf("no such file in %s (the folders named before it in its paragraph)", strings.Join(folders, ", "))
	case identMention:
		return idx.resolve(strings.Split(m.text, "."))
	case nameMention:
		if !idx.names[m.text] {
			return "no Go declaration, method or field of that name in the module"
		}
	}
	return ""
}

func exists(pattern string) bool {
	if strings.ContainsAny(pattern, "*?[") {
		got, _ := filepath.Glob(pattern)
		return len(got) > 0
	}
	_, err := os.Stat(pattern)
	return err == nil
}

func globAnywhere(idx *index, pattern string) bool {
	for f := range idx.files {
		if ok, _ := filepath.Match(pattern, f); ok {
			return true
		}
	}
	return false
}

// index is what the module declares, by name.
type index struct {
	pkgs    map[string]map[string]bool // package name → its package-level names
	types   map[string]bool            // every type's name (any package)
	members map[string]map[string]bool // type name (any package) → its methods and fields
	bases   map[string][]string        // type name → the types it embeds or is defined as
	names   map[string]bool            // every declared name, method and field
	files   map[string]bool            // every file's name (not its folder)
}

// indexModule parses every Go file of the repository (tests included: a doc may name a
// test) and indexes its declarations; it lists every file's name too.
func indexModule(root string) (*index, error) {
	idx := &index{pkgs: map[string]map[string]bool{}, types: map[string]bool{}, members: map[string]map[string]bool{},
		bases: map[string][]string{}, names: map[string]bool{}, files: map[string]bool{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		idx.files[name] = true
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		idx.add(f)
		return nil
	})
	return idx, err
}

func (idx *index) add(f *ast.File) {
	pkg := strings.TrimSuffix(f.Name.Name, "_test")
	if idx.pkgs[pkg] == nil {
		idx.pkgs[pkg] = map[string]bool{}
	}
	declare := func(name string) { idx.pkgs[pkg][name] = true; idx.names[name] = true }
	member := func(typ, name string) {
		if idx.members[typ] == nil {
			idx.members[typ] = map[string]bool{}
		}
		idx.members[typ][name] = true
		idx.names[name] = true
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				declare(d.Name.Name)
				continue
			}
			if typ := typeName(d.Recv.List[0].Type); typ != "" {
				member(typ, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declare(n.Name)
					}
				case *ast.TypeSpec:
					declare(s.Name.Name)
					idx.types[s.Name.Name] = true
					idx.addType(s.Name.Name, s.Type, member)
				}
			}
		}
	}
}

// addType indexes a type's fields (struct) or methods (interface), and what it embeds or
// is defined as (type A = b.B, type A B), whose members are A's too.
func (idx *index) addType(name string, t ast.Expr, member func(typ, name string)) {
	var fields *ast.FieldList
	switch tt := t.(type) {
	case *ast.StructType:
		fields = tt.Fields
	case *ast.InterfaceType:
		fields = tt.Methods
	default:
		if base := typeName(t); base != "" && base != name {
			idx.bases[name] = append(idx.bases[name], base)
		}
		return
	}
	for _, fl := range fields.List {
		if len(fl.Names) == 0 { // embedded
			if base := typeName(fl.Type); base != "" {
				idx.bases[name] = append(idx.bases[name], base)
				member(name, base)
			}
			continue
		}
		for _, n := range fl.Names {
			member(name, n.Name)
		}
	}
}

// typeName is the name of a type expression's named type: T, *T, pkg.T, T[X].
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.ParenExpr:
		return typeName(t.X)
	}
	return ""
}

// hasMember reports whether a type of that name (in any package) has the method or field,
// itself or through what it embeds or is defined as.
func (idx *index) hasMember(typ, name string, seen map[string]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	if idx.members[typ][name] {
		return true
	}
	for _, b := range idx.bases[typ] {
		if idx.hasMember(b, name, seen) {
			return true
		}
	}
	return false
}

// resolve returns "" when parts name something the module declares: pkg.Name (a
// package-level name of a package so named), Type.Member (a method or field of a type so
// named, in any package), or pkg.Type.Member; else what is missing.
func (idx *index) resolve(parts []string) string {
	switch len(parts) {
	case 2:
		if decls, ok := idx.pkgs[parts[0]]; ok {
			if decls[parts[1]] {
				return ""
			}
			if !idx.types[parts[0]] {
				return fmt.Sprintf("package %s declares no %s", parts[0], parts[1])
			}
		}
		if idx.types[parts[0]] {
			if idx.hasMember(parts[0], parts[1], map[string]bool{}) {
				return ""
			}
			return fmt.Sprintf("no type %s has a method or field %s", parts[0], parts[1])
		}
		return fmt.Sprintf("no package or type named %s", parts[0])
	case 3:
		decls, ok := idx.pkgs[parts[0]]
		if !ok {
			return fmt.Sprintf("no package named %s", parts[0])
		}
		if !decls[parts[1]] {
			return fmt.Sprintf("package %s declares no %s", parts[0], parts[1])
		}
		if !idx.hasMember(parts[1], parts[2], map[string]bool{}) {
			return fmt.Sprintf("%s.%s has no method or field %s", parts[0], parts[1], parts[2])
		}
		return ""
	}
	return "not a Go identifier"
}
