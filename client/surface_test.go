package client_test

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"opsq/client"
)

// call is one call of the clients' shared vocabulary: its Python name (snake_case); the
// Go name is its CamelCase, the TypeScript one its camelCase ("ndjson" is NDJSON in
// both). A client without the call says why in its field ("" means it has it); go, when
// set to a name, is Go's own name for it.
type call struct {
	name           string
	goName, py, ts string // "" or "-: why" (absent, on purpose); goName may be a name
	deprecatedFor  string // an old name kept for one release: the call that replaces it
	deprecatedIn   string // which client keeps it: "py" or "ts"
}

// surface is the one table of the clients' calls (README.md of each client: "Names").
// A call added to one client and not to this table, or to the table and not to a client
// that should have it, fails TestClientSurfaces.
var surface = []call{
	{name: "submit"},
	{name: "submit_ndjson"},
	{name: "status"},
	{name: "wait", goName: "-: Status takes the wait", ts: "-: status takes { wait }"},
	{name: "results"},
	{name: "follow", goName: "ResultsFollow"},
	{name: "failures"},
	{name: "all_failures"},
	{name: "retry"},
	{name: "retry_many"},
	{name: "pause"},
	{name: "resume"},
	{name: "cancel"},
	{name: "list"},
	{name: "all_submissions"},
	{name: "reserve"},
	{name: "preview"},
	{name: "complete"},
	{name: "complete_many", goName: "-: Complete is variadic", ts: "-: complete takes an array"},
	{name: "fail"},
	{name: "fail_many", goName: "-: Fail is variadic", ts: "-: fail takes an array"},
	{name: "extend"},
	{name: "throttle"},
	{name: "lift_throttle"},
	{name: "create_schedule"},
	{name: "replace_schedule"},
	{name: "schedule"},
	{name: "schedules"},
	{name: "delete_schedule"},
	{name: "pause_schedule"},
	{name: "resume_schedule"},
	{name: "trigger_schedule"},
	{name: "backfill_schedule"},
	{name: "cluster"},
	{name: "ready", goName: "-: Cluster answers", ts: "-: cluster answers"},
	{name: "close", goName: "-: an http.Client needs no closing", ts: "-: fetch needs no closing"},
	{name: "url", goName: "-: the caller holds it", ts: "-: the caller holds it"},
	// Old names, kept for one release.
	{name: "failures_page", deprecatedFor: "failures", deprecatedIn: "py"},
	{name: "list_all", deprecatedFor: "all_submissions", deprecatedIn: "py"},
}

func camel(snake string, upperFirst bool) string {
	parts := strings.Split(snake, "_")
	for i, p := range parts {
		switch {
		case p == "ndjson":
			parts[i] = "NDJSON"
		case i > 0 || upperFirst:
			parts[i] = strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return strings.Join(parts, "")
}

// want returns the name a client should have for c ("" when it should not), given its
// field and how names are spelled there.
func want(c call, field, client string, spell func(string) string) string {
	if c.deprecatedIn != "" {
		if c.deprecatedIn == client {
			return spell(c.name)
		}
		return ""
	}
	switch {
	case strings.HasPrefix(field, "-"):
		return ""
	case field != "":
		return field
	}
	return spell(c.name)
}

// methods returns the public names of a class (Python or TypeScript) in a source file:
// the lines of its body that match re's first group.
func methods(t *testing.T, path, classStart string, re *regexp.Regexp) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "\n"+classStart)
	if !ok {
		t.Fatalf("%s has no %q", path, classStart)
	}
	var names []string
	for _, line := range strings.Split(body, "\n") {
		if line != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "//") && line != "}" {
			break // the class ended
		}
		if line == "}" {
			break
		}
		if m := re.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], "_") && m[1] != "constructor" {
			names = append(names, m[1])
		}
	}
	return names
}

// TestClientSurfaces compares the Go, Python and TypeScript clients' calls with surface:
// the same call has the same name (in each language's case) in all three.
func TestClientSurfaces(t *testing.T) {
	t.Parallel()
	var goNames []string
	ct := reflect.TypeOf(&client.Client{})
	for i := range ct.NumMethod() {
		goNames = append(goNames, ct.Method(i).Name)
	}
	py := methods(t, "python/opsq/client.py", "class Client:", regexp.MustCompile(`^    def (\w+)\(`))
	ts := methods(t, "typescript/src/client.ts", "export class Client {", regexp.MustCompile(`^  (?:async \*?|\*|get )?(\w+)\(`))

	clients := []struct {
		name  string
		have  []string
		field func(call) string
		spell func(string) string
	}{
		{"go", goNames, func(c call) string { return c.goName }, func(s string) string { return camel(s, true) }},
		{"py", py, func(c call) string { return c.py }, func(s string) string { return s }},
		{"ts", ts, func(c call) string { return c.ts }, func(s string) string { return camel(s, false) }},
	}
	for _, cl := range clients {
		if len(cl.have) < 10 {
			t.Fatalf("%s client: found %d calls (%v); the test reads its source wrong", cl.name, len(cl.have), cl.have)
		}
		wanted := map[string]bool{}
		for _, c := range surface {
			w := want(c, cl.field(c), cl.name, cl.spell)
			if w == "" {
				continue
			}
			wanted[w] = true
			if !slices.Contains(cl.have, w) {
				t.Errorf("%s client has no %s (the call %q of the table in surface_test.go)", cl.name, w, c.name)
			}
		}
		for _, h := range cl.have {
			if !wanted[h] {
				t.Errorf("%s client has %s, which the table in surface_test.go does not list: add the call to the table and to the other clients (or say there why one has none)", cl.name, h)
			}
		}
	}
}
