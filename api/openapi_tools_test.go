package api

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tools tests run the generators that users run on GET /v1/openapi.json, at pinned
// versions, on the document as served, and compile what they generate: oapi-codegen for
// Go (its module, with the runtime the client imports, is pinned in
// testdata/oapi-codegen/go.mod and go.sum) and openapi-typescript with tsc for
// TypeScript (pinned in testdata/openapi-typescript/package.json and its lock), and the
// Prism mock server (testdata/prism). They need
// the Go module proxy and the npm registry (or caches of them) and never skip: a tool that
// is missing is a failure that says what to install.

// servedOpenAPIFile writes the document as served to dir/openapi.json and returns its path.
func servedOpenAPIFile(t *testing.T, dir string) string {
	t.Helper()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// run runs name with args in dir, within timeout, and fails the test with its output
// when it fails.
func run(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out.Bytes())
	}
}

// goTool is the go command that runs this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	t.Fatal("the go command is not on the PATH; the oapi-codegen test runs it (export PATH=$PATH:/usr/local/go/bin)")
	return ""
}

// goClientUse calls the generated client as a Go user would: a reserve of {} (every
// field optional), a JSON submission, an NDJSON upload as a body of its own type, and
// the results as a stream.
const goClientUse = `package oapicodegen

import (
	"context"
	"io"
	"strings"
)

func use(ctx context.Context) error {
	c, err := NewClientWithResponses("http://localhost:3999")
	if err != nil {
		return err
	}
	if _, err := c.ReserveWithResponse(ctx, ReserveJSONRequestBody{}); err != nil {
		return err
	}
	chunks := []string{"a", "b"}
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if _, err := c.SubmitWithResponse(ctx, &SubmitParams{Traceparent: &tp}, SubmitJSONRequestBody{Chunks: &chunks}); err != nil {
		return err
	}
	if _, err := c.SubmitWithBodyWithResponse(ctx, nil, "application/x-ndjson", strings.NewReader("{}\n\"a\"\n")); err != nil {
		return err
	}
	resp, err := c.GetResults(ctx, "1", &GetResultsParams{})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
`

// TestOpenAPIGoClient: oapi-codegen (pinned) generates a Go client from the served
// document, and the client compiles, vets, and offers the calls a user makes.
func TestOpenAPIGoClient(t *testing.T) {
	t.Parallel()
	goCmd := goTool(t)
	tools, err := filepath.Abs(filepath.Join("testdata", "oapi-codegen"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := servedOpenAPIFile(t, dir)
	mod := filepath.Join(dir, "client")
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	// -mod=readonly: the versions are those of go.mod and go.sum, never newer ones.
	env := []string{"GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off"}
	run(t, 5*time.Minute, tools, env, goCmd, "tool", "oapi-codegen",
		"-package", "oapicodegen", "-generate", "types,client", "-o", filepath.Join(mod, "client.gen.go"), doc)
	copyFiles(t, tools, mod, "go.mod", "go.sum", "runtime.go")
	if err := os.WriteFile(filepath.Join(mod, "use.go"), []byte(goClientUse), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, 5*time.Minute, mod, env, goCmd, "vet", ".")
}

// nodeTools are the commands the TypeScript test runs.
func nodeTools(t *testing.T) {
	t.Helper()
	for _, name := range []string{"node", "npm"} {
		if _, err := exec.LookPath(name); err != nil {
			t.Fatalf("%s is not on the PATH: TestOpenAPITypeScript checks the document with openapi-typescript and tsc; install Node.js 18 or later with npm (Debian: apt-get install nodejs npm)", name)
		}
	}
}

// TestOpenAPITypeScript: openapi-typescript (pinned) generates types from the served
// document, and testdata/openapi-typescript/use.ts, which calls the API with
// openapi-fetch as a user would, type-checks under tsc --strict: a reserve of {} (no
// field the server defaults is required), NDJSON bodies as strings, error codes as an
// enum.
func TestOpenAPITypeScript(t *testing.T) {
	t.Parallel()
	nodeTools(t)
	pinned, err := filepath.Abs(filepath.Join("testdata", "openapi-typescript"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := servedOpenAPIFile(t, dir)
	copyFiles(t, pinned, dir, "package.json", "package-lock.json", "use.ts")
	// npm ci installs exactly the lock's versions; no scripts run.
	run(t, 5*time.Minute, dir, nil, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	bin := filepath.Join(dir, "node_modules", ".bin")
	run(t, 2*time.Minute, dir, nil, filepath.Join(bin, "openapi-typescript"), doc, "-o", "schema.d.ts")
	run(t, 2*time.Minute, dir, nil, filepath.Join(bin, "tsc"), "--strict", "--noEmit", "--target", "es2022",
		"--module", "nodenext", "--moduleResolution", "nodenext", "--skipLibCheck", "use.ts")
}

// copyFiles copies the named files of from into to.
func copyFiles(t *testing.T, from, to string, names ...string) {
	t.Helper()
	for _, f := range names {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenAPIPrism: Prism (pinned), the mock server that front-end teams and client
// tests run on the document, accepts what the server accepts and answers what it
// answers: an NDJSON upload (refused when NDJSON was described as a JSON array), a
// JSON submission sent as curl -d sends it, a reserve of {}, a results stream (a 500
// when it was an array), HEAD /healthz; and it still refuses a bad JSON body.
func TestOpenAPIPrism(t *testing.T) {
	t.Parallel()
	nodeTools(t)
	pinned, err := filepath.Abs(filepath.Join("testdata", "prism"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := servedOpenAPIFile(t, dir)
	copyFiles(t, pinned, dir, "package.json", "package-lock.json")
	run(t, 5*time.Minute, dir, nil, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var log bytes.Buffer
	prism := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "prism"), "mock", "-h", "127.0.0.1", "-p", port, doc)
	prism.Dir, prism.Stdout, prism.Stderr, prism.WaitDelay = dir, &log, &log, 5*time.Second
	if err := prism.Start(); err != nil {
		t.Fatalf("starting prism: %v", err)
	}
	defer func() { cancel(); _ = prism.Wait() }()
	base := "http://127.0.0.1:" + port
	call := func(method, path, contentType, body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer any")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for call("GET", "/healthz", "", "") != http.StatusOK {
		select {
		case <-ctx.Done():
			t.Fatalf("prism mock did not answer GET /healthz:\n%s", log.Bytes())
		case <-time.After(200 * time.Millisecond):
		}
	}
	for _, c := range []struct {
		what, method, path, contentType, body string
		want                                  int
	}{
		{"an NDJSON upload", "POST", "/v1/submissions", "application/x-ndjson", "{\"metadata\": \"m\"}\n\"a\"\n\"b\"\n", 0},
		{"a JSON submission", "POST", "/v1/submissions", "application/json", `{"chunks": ["a"], "priority": 5}`, 0},
		{"a submission as curl -d sends it", "POST", "/v1/submissions", "application/x-www-form-urlencoded", `{"chunks": ["a"]}`, 0},
		{"a reserve of {}", "POST", "/v1/reserve", "application/json", `{}`, 200},
		{"the results", "GET", "/v1/submissions/123/results", "", "", 200},
		{"HEAD /healthz", "HEAD", "/healthz", "", "", 200},
		{"a bad JSON submission", "POST", "/v1/submissions", "application/json", `{"chunks": [7]}`, 400},
		{"a reserve of max 0", "POST", "/v1/reserve", "application/json", `{"max": 0}`, 400},
	} {
		got := call(c.method, c.path, c.contentType, c.body)
		if ok := got == c.want || c.want == 0 && (got == 200 || got == 201); !ok {
			t.Errorf("prism mock, %s (%s %s): %d; want %d (0: 200 or 201)", c.what, c.method, c.path, got, c.want)
		}
	}
	if t.Failed() {
		t.Logf("prism's log:\n%s", log.Bytes())
	}
}
