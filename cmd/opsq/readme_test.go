package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// The README's walkthrough runs as a test, so that it cannot rot (docs/design.md §7).
//
// Every ```sh block under a runnable section's heading (readmeSections) runs, in order, in
// one bash with "set -eu", as a reader would paste it into one terminal: shell variables
// (an id, a token) carry from one command to the next. A comment line "# → text" after a
// command is what it prints: the words of each such line (keys, words; not numbers, ids or
// timings) must appear, in order, on one line of what the commands since the previous
// "# →" printed.

const (
	readmePath          = "../../README.md"
	readmeDevAddr       = "localhost:3999" // where the README's commands find "make run"
	expectationPrefix   = "# → "
	walkthroughDeadline = 4 * time.Minute // the run takes well under a minute; this holds on a busy machine
)

// readmeSection is a section of the README whose ```sh blocks run.
type readmeSection struct {
	heading string
	// subsections must each have a block that runs.
	subsections []string
	// auth is the OPSQ_AUTH of the instance the section runs against, as the README
	// tells the reader to start it.
	auth string
}

var readmeSections = []readmeSection{
	{heading: "## A five-minute walkthrough", auth: "off", subsections: []string{
		"### Submit", "### Consume", "### Watch", "### When a chunk fails", "### The same over HTTP",
	}},
	{heading: "## Security", auth: "required"}, // the walkthrough with keys
	{heading: "## Pipelines and schedules", auth: "off"},
}

// readmeStep is what the walkthrough runs between two expectations, and what it must print.
type readmeStep struct {
	line   int      // of its first command in README.md
	script string   // the commands, as written
	want   []string // the "# →" lines after them, without the prefix
}

// sectionSteps reads the runnable blocks of a README's section.
func sectionSteps(readme string, sec readmeSection) (steps []readmeStep, err error) {
	lines := strings.Split(readme, "\n")
	in, found := false, false
	sub := ""                // the current ### heading
	ran := map[string]bool{} // subsections with a runnable block
	blocks := 0
	inBlock, runBlock := false, false
	var cur *readmeStep
	flush := func() {
		if cur != nil && strings.TrimSpace(cur.script) != "" {
			steps = append(steps, *cur)
		}
		cur = nil
	}
	for i, l := range lines {
		if inBlock {
			if strings.TrimSpace(l) == "```" {
				inBlock = false
				flush()
				continue
			}
			if !runBlock {
				continue
			}
			if t := strings.TrimSpace(l); strings.HasPrefix(t, expectationPrefix) {
				if cur == nil {
					return nil, fmt.Errorf("README.md:%d: %q follows no command", i+1, t)
				}
				cur.want = append(cur.want, strings.TrimPrefix(t, expectationPrefix))
				continue
			}
			if cur != nil && len(cur.want) > 0 {
				flush()
			}
			if cur == nil {
				cur = &readmeStep{line: i + 1}
			}
			cur.script += l + "\n"
			continue
		}
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == sec.heading
			found = found || in
		case in && strings.HasPrefix(l, "### "):
			sub = l
		case strings.HasPrefix(l, "```"):
			inBlock = true
			runBlock = in && strings.TrimSpace(strings.TrimPrefix(l, "```")) == "sh"
			if runBlock {
				ran[sub] = true
				blocks++
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("README.md has no %q section", sec.heading)
	}
	if blocks == 0 {
		return nil, fmt.Errorf("README.md's %q has no ```sh block", sec.heading)
	}
	for _, s := range sec.subsections {
		if !ran[s] {
			return nil, fmt.Errorf("README.md's %q has no ```sh block under %q", sec.heading, s)
		}
	}
	return steps, nil
}

var wordRE = regexp.MustCompile(`[A-Za-z0-9_]+`)

// expectedWords are the words of an expectation that must be printed: not numbers (ids,
// counts, timings: "47ms" is a number) and not single letters.
func expectedWords(want string) []string {
	var out []string
	for _, w := range wordRE.FindAllString(want, -1) {
		if len(w) > 1 && (w[0] < '0' || w[0] > '9') {
			out = append(out, w)
		}
	}
	return out
}

// printedLine reports whether one line of out (split at "\n" and at the "\r" of progress
// lines) holds the words in order, each a whole word.
func printedLine(out string, words []string) bool {
	for _, line := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		got, i := wordRE.FindAllString(line, -1), 0
		for _, g := range got {
			if i < len(words) && g == words[i] {
				i++
			}
		}
		if i == len(words) {
			return true
		}
	}
	return false
}

func TestReadmeWalkthroughParsing(t *testing.T) {
	t.Parallel()
	readme := "# x\n\n## A five-minute walkthrough\n\n```sh\nexport A=1\n```\n\n### Submit\n\n" +
		"```sh\nID=$(opsq submit f)\n# → submitted 3 chunks in 4ms\necho \"$ID\"\n```\n\n```\nnot run\n```\n\n" +
		"### Consume\n```sh\nopsq work\n```\n### Watch\n```sh\nopsq status\n```\n### When a chunk fails\n```sh\nx\n```\n" +
		"### The same over HTTP\n```sh\ny\n# → {\"id\":\"1\",\"chunks_total\":2}\n```\n\n## Strategies\n\n```sh\nnot run either\n```\n"
	walk := readmeSections[0]
	steps, err := sectionSteps(readme, walk)
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	for _, s := range steps {
		scripts = append(scripts, strings.TrimSpace(s.script)+" => "+strings.Join(s.want, "|"))
	}
	want := []string{
		"export A=1 => ",
		"ID=$(opsq submit f) => submitted 3 chunks in 4ms",
		`echo "$ID" => `,
		"opsq work => ", "opsq status => ", "x => ",
		`y => {"id":"1","chunks_total":2}`,
	}
	if strings.Join(scripts, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(scripts, "\n"), strings.Join(want, "\n"))
	}

	if _, err := sectionSteps(strings.Replace(readme, "### Watch", "### Look", 1), walk); err == nil {
		t.Error("a walkthrough without a Watch block: no error")
	}
	if _, err := sectionSteps(strings.Replace(readme, walk.heading, "## Walk", 1), walk); err == nil {
		t.Error("a README without the walkthrough: no error")
	}
	if _, err := sectionSteps(readme, readmeSection{heading: "## Strategies"}); err != nil {
		t.Errorf("a section with a block: %v", err)
	}
	if _, err := sectionSteps(readme+"\n## Security\n\nno block\n", readmeSection{heading: "## Security"}); err == nil {
		t.Error("a section without a block: no error")
	}

	for _, c := range []struct {
		out, want string
		ok        bool
	}{
		{"submitted 1000 chunks in 1.2s (800 chunks/s)\n", "submitted 1000 chunks in 13ms (74 400 chunks/s)", true},
		{"work: 1 done\rstopped after 9s: 3 done, 0 failed, 0 lost\n", "stopped after 2s: 2 done, 0 failed, 0 lost", true},
		{`{"id":"9","chunks_total":2}`, `{"id":"…","chunks_total":2}`, true},
		{`{"chunks_total":2,"id":"9"}`, `{"id":"…","chunks_total":2}`, false}, // order
		{"64 shards: 64 claimed by 2 instances, 0 unclaimed", "64 shards: 64 claimed by 1 instance, 0 unclaimed", false},
		{"state      failed\n", "state      completed", false},
	} {
		if got := printedLine(c.out, expectedWords(c.want)); got != c.ok {
			t.Errorf("printedLine(%q, words of %q) = %v; want %v", c.out, c.want, got, c.ok)
		}
	}
}

// TestReadmeWalkthrough runs the README's runnable sections (readmeSections) in order, as
// one reader in one terminal would, each against a fresh instance on a fresh database
// started as the README says (keys off for the walkthrough, required for Security), with
// the commands' "opsq" this test binary and "localhost:3999" that section's instance.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []struct{ name, pkg string }{
		{"bash", "bash"}, {"curl", "curl"}, {"jq", "jq"}, {"grep", "grep"},
		{"sed", "sed"}, {"seq", "coreutils"}, {"tr", "coreutils"}, {"tee", "coreutils"}, {"head", "coreutils"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			t.Fatalf("the README's walkthrough needs %s: install it (apt-get install %s)", tool.name, tool.pkg)
		}
	}
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	var steps []readmeStep
	var starts []int // the index in steps of each section's first step
	checks := 0
	for _, sec := range readmeSections {
		ss, err := sectionSteps(string(raw), sec)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			for _, w := range s.want {
				if len(expectedWords(w)) == 0 {
					t.Fatalf("README.md:%d: %q%s shows no word to check", s.line, expectationPrefix, w)
				}
				checks++
			}
		}
		starts = append(starts, len(steps))
		steps = append(steps, ss...)
	}
	if checks < 25 {
		t.Fatalf("README.md's runnable sections show %d outputs (%q lines); want at least 25", checks, expectationPrefix)
	}

	// The reader's clone: bin/opsq, which the walkthrough's first command puts on the PATH.
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(dir, "bin", "opsq")); err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	var script strings.Builder
	script.WriteString("set -eu\n")
	for si, sec := range readmeSections {
		inst, dbURL := readmeInstance(t, sec.auth)
		addr := strings.TrimPrefix(inst.URL, "http://")
		// What the reader's make run gives the CLI: opsq at its default URL and, for
		// "opsq keys", the development database (OPSQ_DATABASE_URL wins over
		// OPSQ_DEV_CLUSTER).
		fmt.Fprintf(&script, "export OPSQ_URL=%q OPSQ_DATABASE_URL=%q\n", inst.URL, dbURL)
		end := len(steps)
		if si+1 < len(starts) {
			end = starts[si+1]
		}
		for i := starts[si]; i < end; i++ {
			s := steps[i]
			body := strings.ReplaceAll(s.script, readmeDevAddr, addr)
			if strings.Contains(body, "3999") {
				t.Fatalf("README.md:%d: a runnable block names port 3999 other than as %s:\n%s", s.line, readmeDevAddr, s.script)
			}
			fmt.Fprintf(&script, "{\n%s} > %q 2>&1\n: > %q\n", body,
				filepath.Join(outDir, fmt.Sprint(i)), filepath.Join(outDir, fmt.Sprint(i)+".ok"))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), walkthroughDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPSQ_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, opsqBinary.Env...) // "opsq" is this test binary (TestMain)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	runOut, runErr := cmd.CombinedOutput()
	t.Logf("the README's %d steps ran in %s", len(steps), time.Since(start).Round(time.Millisecond))

	for i, s := range steps {
		out, _ := os.ReadFile(filepath.Join(outDir, fmt.Sprint(i)))
		if _, err := os.Stat(filepath.Join(outDir, fmt.Sprint(i)+".ok")); err != nil {
			t.Fatalf("README.md:%d: the walkthrough stopped here (%v; %s):\n%s\nprinted:\n%s%s",
				s.line, runErr, strings.TrimSpace(string(runOut)), s.script, out, ctxNote(ctx))
		}
		for _, w := range s.want {
			if !printedLine(string(out), expectedWords(w)) {
				t.Errorf("README.md:%d: after\n%swant a line with the words of %q (%s); printed:\n%s",
					s.line, s.script, w, strings.Join(expectedWords(w), " "), out)
			}
		}
	}
	if runErr != nil {
		t.Fatalf("the walkthrough's bash: %v\n%s", runErr, runOut)
	}
}

// readmeInstance starts one instance on a fresh database with OPSQ_AUTH auth, as
// "make run" or "OPSQ_AUTH=required make run" does, and returns it and its database.
func readmeInstance(t *testing.T, auth string) (*clustertest.Instance, string) {
	t.Helper()
	dbURL := pgtest.NewDB(t)
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH="+auth)
	if auth == "required" {
		c.Key = createKey(t, dbURL, "readme-test-admin", "admin") // for the kit's own checks
	}
	return c.StartN(1)[0], dbURL
}

func ctxNote(ctx context.Context) string {
	if ctx.Err() != nil {
		return fmt.Sprintf("\n(the walkthrough was stopped after %s)", walkthroughDeadline)
	}
	return ""
}

// mdLinkRE is a Markdown link or image: [text](target) or ![alt](target).
var mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinks checks that every relative link of README.md and docs/*.md points at a file
// of the repository, and a link to a heading at one that exists: they must work in a clone.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{readmePath}, files...)
	if len(files) < 4 {
		t.Fatalf("found %v; want README.md and docs/*.md (design, engine, benchmarks …)", files)
	}
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(raw)) {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			resolved := f
			if path != "" {
				resolved = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(resolved); err != nil {
					t.Errorf("%s:%d: link %q: no such file in the repository", rel(f), l.line, target)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(resolved, ".md") {
				continue
			}
			body, err := os.ReadFile(resolved)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel(f), l.line, target, err)
				continue
			}
			if !headingAnchors(string(body))[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", rel(f), l.line, target, rel(resolved), anchor)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d relative links; want the README's and the docs' (at least 10)", checked)
	}
}

func rel(path string) string { return strings.TrimPrefix(filepath.Clean(path), "../../") }

type mdLink struct {
	line   int
	target string
}

// markdownLinks are the links of a Markdown text outside code blocks and code spans.
func markdownLinks(md string) []mdLink {
	var out []mdLink
	inBlock := false
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		parts := strings.Split(l, "`") // odd parts are code spans
		for j := 0; j < len(parts); j += 2 {
			for _, m := range mdLinkRE.FindAllStringSubmatch(parts[j], -1) {
				out = append(out, mdLink{line: i + 1, target: m[1]})
			}
		}
	}
	return out
}

// headingAnchors are the anchors GitHub gives a Markdown text's headings: lower case,
// spaces as hyphens, punctuation dropped.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	inBlock := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
		}
		if inBlock || !strings.HasPrefix(l, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

func TestHeadingAnchors(t *testing.T) {
	t.Parallel()
	got := headingAnchors("# opsq\n## Many instances\n```\n# not a heading\n```\n### The repository's folders\n## Dashboard\n")
	for _, a := range []string{"opsq", "many-instances", "the-repositorys-folders", "dashboard"} {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a code block made an anchor: %v", got)
	}
}
