package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/labstack/echo/v4"
	"go.yaml.in/yaml/v3"

	"opsq/api/wire"
	"opsq/queuer"
)

// The OpenAPI tests check api/openapi.yaml against the server, with kin-openapi: the
// document is valid OpenAPI 3.1; every route the server registers is documented and every
// documented route is registered; and every request and answer of a whole run, errors
// included, validates against it.

// loadOpenAPI loads the document as the server serves it (JSON), and validates it.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	return loadOpenAPIData(t, raw)
}

// loadStrictOpenAPI loads the document with each NDJSON body's schema (a string, for the
// tools) replaced by its x-ndjson-lines (the array of its lines' values), so that a run
// checks every line of every NDJSON body.
func loadStrictOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mt := range ndjsonMediaTypes(doc) {
		if lines, ok := mt["x-ndjson-lines"]; ok {
			mt["schema"] = lines
			n++
		}
	}
	if n == 0 {
		t.Fatal("api/openapi.yaml has no x-ndjson-lines; the NDJSON bodies go unchecked")
	}
	strict, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return loadOpenAPIData(t, strict)
}

// ndjsonMediaTypes returns every application/x-ndjson media type object of doc's
// operations, request bodies and answers, keyed by where it is.
func ndjsonMediaTypes(doc map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	add := func(where string, content any) {
		if mt := obj(obj(content)["application/x-ndjson"]); mt != nil {
			out[where] = mt
		}
	}
	for path, item := range obj(doc["paths"]) {
		for method, op := range obj(item) {
			add(method+" "+path+" request", obj(obj(op)["requestBody"])["content"])
			for status, resp := range obj(obj(op)["responses"]) {
				add(method+" "+path+" "+status, obj(resp)["content"])
			}
		}
	}
	return out
}

// loadOpenAPIData loads and validates a document given as JSON.
func loadOpenAPIData(t *testing.T, raw []byte) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("loading api/openapi.yaml: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("api/openapi.yaml is OpenAPI %s; want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("api/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	return doc
}

// documentedOperations lists "METHOD /path/{param}" of every operation of doc.
func documentedOperations(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// registeredRoutes lists "METHOD /path/{param}" of every route of the REST API the server
// registers: echo's :param becomes {param}. Routes of the dashboard (/ui/) are not part of
// the REST API, and echo's own not-found routes of groups are no routes of ours.
func registeredRoutes(h *Handler) []string {
	var out []string
	for _, r := range h.Handler.(*echo.Echo).Routes() {
		if r.Method == echo.RouteNotFound || r.Path == "/ui" || strings.HasPrefix(r.Path, "/ui/") || r.Path == queuer.GiveBackPath {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		out = append(out, r.Method+" "+strings.Join(parts, "/"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	e := setup(t, Config{})
	documented, registered := documentedOperations(doc), registeredRoutes(e.H)
	// Every GET route answers HEAD too (head.go); the document lists it where probes use it.
	for _, r := range registered {
		if path, ok := strings.CutPrefix(r, "GET "); ok && slices.Contains(documented, "HEAD "+path) {
			registered = append(registered, "HEAD "+path)
		}
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("the server registers %s; api/openapi.yaml does not document it", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("api/openapi.yaml documents %s; the server does not register it", d)
		}
	}
	if len(registered) < 10 {
		t.Errorf("found %d routes in the server: %v; the walk of echo's routes is broken", len(registered), registered)
	}
}

// TestOpenAPINDJSON: every NDJSON body is described as the tools read a stream — a
// string schema — with its lines described beside it in x-ndjson-lines (an array schema,
// which the run checks: loadStrictOpenAPI). An array schema in place of the string made
// Prism refuse every NDJSON upload and openapi-typescript type the upload as a tuple.
func TestOpenAPINDJSON(t *testing.T) {
	t.Parallel()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	mts := ndjsonMediaTypes(doc)
	for _, want := range []string{"post /v1/submissions request", "get /v1/submissions/{id}/results 200"} {
		if mts[want] == nil {
			t.Errorf("%s: no application/x-ndjson body in api/openapi.yaml", want)
		}
	}
	for where, mt := range mts {
		schema, _ := mt["schema"].(map[string]any)
		if schema["type"] != "string" || len(schema) != 2 || schema["description"] == nil {
			t.Errorf("%s: application/x-ndjson schema %v; want {type: string, description: …}, which every tool reads as a stream", where, schema)
		}
		lines, _ := mt["x-ndjson-lines"].(map[string]any)
		if lines["type"] != "array" {
			t.Errorf("%s: x-ndjson-lines %v; want the array schema of the body's lines", where, lines)
		}
	}
}

// TestOpenAPIRefDepth: every reference names a component, #/components/{kind}/{name},
// and nothing inside one: oapi-codegen refuses deeper references ("unexpected reference
// depth"). TestOpenAPIGoClient runs it; this test says which reference at once.
func TestOpenAPIRefDepth(t *testing.T) {
	t.Parallel()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	component := regexp.MustCompile(`^#/components/[A-Za-z]+/[A-Za-z0-9_.-]+$`)
	n := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				if !component.MatchString(ref) {
					t.Errorf("$ref %q: refer to a component (#/components/schemas/Name), not into one; generators refuse it", ref)
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	if n < 50 {
		t.Errorf("found %d references in api/openapi.yaml; the walk is broken", n)
	}
}

// TestOpenAPIServed: GET /v1/openapi.json answers the document, as JSON.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	r := getPath(t, e, "/v1/openapi.json")
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /v1/openapi.json: %d %s; want 200 application/json", r.Status, r.Header.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatalf("GET /v1/openapi.json: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Paths["/v1/reserve"] == nil {
		t.Errorf("GET /v1/openapi.json: openapi %q, paths %v; want 3.1.0 with /v1/reserve", doc.OpenAPI, doc.Paths)
	}
}

var registerNDJSON sync.Once

// ndjsonDecoder reads an NDJSON body as the array of its lines' JSON values, as the
// document describes it; empty lines are skipped, as the server does.
func ndjsonDecoder(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	out := []any{}
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("NDJSON line %d: %w", len(out)+1, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// validator is an http.RoundTripper that checks each request and its answer against the
// document, and records what it saw.
type validator struct {
	t      *testing.T
	router routers.Router

	mu   sync.Mutex
	seen map[string]bool // "METHOD /path/{param} STATUS"
}

// invalidKey marks, in a request's context, a request that is bad on purpose: the
// document must refuse it too.
type invalidKey struct{}

func newValidator(t *testing.T, baseURL string) *validator {
	doc := loadStrictOpenAPI(t)
	doc.Servers = openapi3.Servers{{URL: baseURL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	registerNDJSON.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/x-ndjson", ndjsonDecoder)
		// The server reads a body of any other Content-Type, or none, as JSON.
		openapi3filter.RegisterBodyDecoder("*/*", openapi3filter.JSONBodyDecoder)
	})
	return &validator{t: t, router: router, seen: map[string]bool{}}
}

func (v *validator) RoundTrip(req *http.Request) (*http.Response, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		v.t.Errorf("%s %s: not in api/openapi.yaml: %v", req.Method, req.URL, err)
		return http.DefaultTransport.RoundTrip(req)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	// A body that can be read again is checked; a streamed one (the stalled upload) is not.
	if req.GetBody != nil {
		check := req.Clone(req.Context())
		if check.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
		in.Request = check
		err := openapi3filter.ValidateRequest(req.Context(), in)
		switch invalid := req.Context().Value(invalidKey{}) != nil; {
		case err != nil && !invalid:
			v.t.Errorf("%s %s: the request does not validate against api/openapi.yaml: %v", req.Method, req.URL, err)
		case err == nil && invalid:
			v.t.Errorf("%s %s: a bad request validates against api/openapi.yaml; the document is too loose", req.Method, req.URL)
		}
		in.Request = req
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		v.t.Errorf("%s %s: the answer %d %s does not validate against api/openapi.yaml: %v", req.Method, req.URL, resp.StatusCode, body, err)
	}
	v.mu.Lock()
	v.seen[fmt.Sprintf("%s %s %d", req.Method, route.Path, resp.StatusCode)] = true
	v.mu.Unlock()
	return resp, nil
}

// TestOpenAPIRun: a whole run — submissions in JSON, NDJSON and object-storage mode, an
// idempotent repeat, status, a status wait, list, reserve (a strategy tree, and a wait
// that finds nothing), extend, complete, fail, results, cancel, cluster, the operations
// routes, and each error status — validates against the document, requests and answers.
func TestOpenAPIRun(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{
		MaxBody:         64 << 10,
		BodyIdleTimeout: 500 * time.Millisecond,
		Ready:           func(context.Context) error { return errors.New("not ready, for the test") },
	})
	v := newValidator(t, e.URL)
	hc := &http.Client{Transport: v}
	ctx := t.Context()
	call := func(method, path, contentType, body string) reply {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, e.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	expect := func(r reply, status int, what string) reply {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s; want %d", what, r.Status, r.Body, status)
		}
		return r
	}
	decode := func(r reply, v any) {
		t.Helper()
		if err := json.Unmarshal(r.Body, v); err != nil {
			t.Fatalf("decoding %s: %v", r.Body, err)
		}
	}
	const js, nd = "application/json", "application/x-ndjson"

	// Producer.
	var a, b, c wire.Created
	decode(expect(call("POST", "/v1/submissions", js, `{"chunks": ["a", "b"], "metadata": "run 1",
		"strategic_metadata": {"company_id": 42, "mode": "preview"}, "priority": 5, "max_retries": 0,
		"idempotency_key": "k-1"}`), 201, "submit JSON"), &a)
	expect(call("POST", "/v1/submissions", js, `{"chunks": ["a", "b"], "idempotency_key": "k-1"}`), 200, "idempotent repeat")
	decode(expect(call("POST", "/v1/submissions", nd, "{\"metadata\": \"run 2\", \"strategic_metadata\": {\"company_id\": 7}}\n\"x\"\n\n\"y\"\n"), 201, "submit NDJSON"), &b)
	decode(expect(call("POST", "/v1/submissions", "", `{"prefix": "s3://bucket/run-3/", "chunk_count": 2, "priority": -1}`), 201, "submit object storage"), &c)
	expect(call("POST", "/v1/submissions", js, `{"chunks": []}`), 201, "submit no chunks")
	expect(call("GET", "/v1/submissions/"+a.ID, "", ""), 200, "status")
	expect(call("GET", "/v1/submissions/"+c.ID, "", ""), 200, "status of object storage")
	var page wire.StatusList
	decode(expect(call("GET", "/v1/submissions?state=in_progress&limit=1", "", ""), 200, "list"), &page)
	if page.NextAfter == nil {
		t.Fatalf("list limit=1 of several: next_after null")
	}
	expect(call("GET", "/v1/submissions?state=in_progress&key=company_id&value=42&after="+*page.NextAfter, "", ""), 200, "list by metadata")
	expect(call("GET", "/v1/submissions?key=mode&value=preview", "", ""), 200, "list by metadata, string")
	expect(call("GET", "/v1/submissions?state=paused&key=company_id&value=42", "", ""), 200, "list the paused ones by metadata")
	expect(call("GET", "/v1/submissions?state=scheduled", "", ""), 200, "list the scheduled ones")
	expect(call("GET", "/v1/submissions?state=running&limit=1", "", ""), 200, "list the running ones")

	// Consumer.
	var res wire.Reserved
	decode(expect(call("POST", "/v1/reserve", js, `{"max": 10, "lease": "1m", "consumer": "openapi-test",
		"strategy": {"or_else": {"first": {"select_only": {"key": "mode", "value": "preview", "then": "oldest_first"}},
		"fallback": {"prefer_distinct": {"key": "company_id", "max": 1}}}}}`), 200, "reserve"), &res)
	if len(res.Chunks) != 6 {
		t.Fatalf("reserve max 10: %d chunks; want the 6 submitted", len(res.Chunks))
	}
	tokens := map[string][]string{}
	for _, ch := range res.Chunks {
		tokens[ch.SubmissionID] = append(tokens[ch.SubmissionID], ch.Token)
	}
	tokJSON, _ := json.Marshal(tokens[a.ID])
	expect(call("POST", "/v1/extend", js, `{"tokens": `+string(tokJSON)+`, "lease": "2m"}`), 200, "extend")
	expect(call("POST", "/v1/extend", js, `{"tokens": ["forged"]}`), 200, "extend forged")
	expect(call("POST", "/v1/throttle", js, `{"key": "company_id", "value": "openapi-test", "for": "1s"}`), 200, "throttle")
	expect(call("POST", "/v1/throttle", js, `{"key": "company_id", "value": 1, "for": "2h"}`), 400, "throttle too long")
	expect(call("DELETE", "/v1/throttle", js, `{"key": "company_id", "value": "openapi-test"}`), 200, "lift a throttle")
	expect(call("DELETE", "/v1/throttle?key=company_id&value=openapi-test", "", ""), 404, "lift a throttle not in force")
	comp, _ := json.Marshal(wire.CompleteRequest{Completions: []wire.Completion{
		{Token: tokens[a.ID][0], Output: "A"}, {Token: tokens[a.ID][1], Output: "B"}, {Token: "forged", Output: ""},
	}})
	expect(call("POST", "/v1/complete", js, string(comp)), 200, "complete")
	no := false
	failure, _ := json.Marshal(wire.FailRequest{Failures: []wire.ChunkFailure{
		{Token: tokens[b.ID][0], Error: "boom", Retry: &no}, {Token: tokens[b.ID][1], Error: "retry me", RetryAfter: "30s"},
	}})
	expect(call("POST", "/v1/fail", js, string(failure)), 200, "fail")
	expect(call("GET", "/v1/submissions/"+a.ID+"?wait=5s", "", ""), 200, "status wait")
	expect(call("GET", "/v1/submissions/"+b.ID+"?wait=100ms", "", ""), 200, "status of a failed submission")
	expect(call("GET", "/v1/submissions/"+a.ID+"/results", "", ""), 200, "results")
	expect(call("POST", "/v1/submissions/"+c.ID+"/cancel", "", ""), 200, "cancel")

	// The lifecycle: its fields, failures, pause, resume, follow, retry.
	var d wire.Created
	decode(expect(call("POST", "/v1/submissions", js, `{"chunks": ["l"], "on_failure": {"fail_after": {"fraction": 0.5}},
		"retry_backoff": {"initial": "0s", "factor": 2, "max": "1m"}, "not_before": "1s"}`), 201, "submit with the lifecycle fields"), &d)
	expect(call("POST", "/v1/submissions", nd, "{\"on_failure\": \"continue\", \"not_before\": \"2026-01-01T00:00:00Z\"}\n\"x\"\n"), 201, "submit NDJSON with the lifecycle fields")
	expect(call("GET", "/v1/submissions/"+d.ID, "", ""), 200, "status with the lifecycle fields")
	expect(call("GET", "/v1/submissions/"+b.ID+"/failures?limit=10", "", ""), 200, "failures")
	expect(call("POST", "/v1/submissions/"+d.ID+"/pause", "", ""), 200, "pause")
	expect(call("POST", "/v1/submissions/"+d.ID+"/resume", "", ""), 200, "resume")
	expect(call("GET", "/v1/submissions/"+a.ID+"/results?follow=true", "", ""), 200, "results followed")
	expect(call("POST", "/v1/submissions/"+b.ID+"/retry", js, `{"chunks": "unfinished", "max_retries": 1}`), 200, "retry")
	expect(call("POST", "/v1/submissions/retry", js, `{"state": "failed", "key": "company_id", "value": 7, "limit": 10}`), 200, "bulk retry")
	expect(call("POST", "/v1/submissions/"+a.ID+"/retry", "", ""), 409, "retry of a completed submission")
	expect(call("POST", "/v1/submissions/"+a.ID+"/pause", "", ""), 409, "pause of a completed submission")
	expect(call("POST", "/v1/reserve", js, `{"wait": "200ms", "strategy": "random"}`), 200, "reserve that waits and finds nothing")
	expect(call("POST", "/v1/reserve", "", ""), 200, "reserve with no body")

	// Operations.
	expect(call("GET", "/v1/cluster", "", ""), 200, "cluster")
	expect(call("GET", "/healthz", "", ""), 200, "healthz")
	expect(call("GET", "/metrics", "", ""), 200, "metrics")
	expect(call("GET", "/v1/openapi.json", "", ""), 200, "openapi.json")

	// Errors. The bad requests are refused by the document too.
	ctx = context.WithValue(t.Context(), invalidKey{}, true)
	expect(call("POST", "/v1/reserve", js, `{"max": 0}`), 400, "reserve max 0")
	expect(call("POST", "/v1/submissions", js, `{"chunks": [7]}`), 400, "submit a number as a chunk")
	expect(call("GET", "/v1/submissions/abc", "", ""), 400, "status of a malformed id")
	expect(call("GET", "/v1/submissions?limit=5000", "", ""), 400, "list limit 5000")
	expect(call("POST", "/v1/reserve", js, `{"strategy": {"select_only": {"key": "mode"}}}`), 400, "reserve select_only without a value")
	expect(call("POST", "/v1/fail", js, `{"failures": [{"error": "no token"}]}`), 400, "fail without a token")
	expect(call("POST", "/v1/submissions", js, `{"chunks": ["a"], "on_failure": "sometimes"}`), 400, "submit a bad on_failure")
	expect(call("POST", "/v1/submissions/retry", js, `{"limit": 0}`), 400, "bulk retry limit 0")
	ctx = t.Context()
	expect(call("GET", "/v1/submissions/12345", "", ""), 404, "status of an unknown id")
	expect(call("POST", "/v1/submissions/"+c.ID+"/cancel", "", ""), 409, "cancel of a cancelled submission")
	expect(call("GET", "/v1/submissions/"+b.ID+"/results", "", ""), 200, "results of a failed submission")
	expect(call("POST", "/v1/submissions", js, `{"chunks": ["`+strings.Repeat("x", 70<<10)+`"]}`), 413, "submit over MaxBody")
	expect(call("GET", "/readyz", "", ""), 503, "readyz when not ready")
	// 408: an upload that stalls; the server cuts it after BodyIdleTimeout.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = io.WriteString(pw, "{\"metadata\": \"stalled\"}\n\"first\"\n") }()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.URL+"/v1/submissions", pr)
	req.Header.Set("Content-Type", nd)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("stalled upload: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled upload: %d; want 408", resp.StatusCode)
	}

	// Every status of the run was seen, so none of the checks above passed vacuously.
	for _, want := range []string{
		"POST /v1/submissions 201", "POST /v1/submissions 200", "GET /v1/submissions 200",
		"GET /v1/submissions/{id} 200", "GET /v1/submissions/{id}/results 200",
		"POST /v1/submissions/{id}/cancel 200", "POST /v1/reserve 200", "POST /v1/complete 200",
		"POST /v1/fail 200", "POST /v1/extend 200", "GET /v1/cluster 200", "POST /v1/throttle 200", "POST /v1/throttle 400",
		"POST /v1/reserve 400", "GET /v1/submissions/{id} 404", "POST /v1/submissions 408",
		"POST /v1/submissions 413", "GET /readyz 503",
		"GET /v1/submissions/{id}/failures 200", "POST /v1/submissions/{id}/retry 200", "POST /v1/submissions/retry 200",
		"POST /v1/submissions/{id}/pause 200", "POST /v1/submissions/{id}/resume 200", "POST /v1/submissions/{id}/retry 409",
		"POST /v1/submissions/{id}/pause 409",
	} {
		if !v.seen[want] {
			t.Errorf("the run saw no %s", want)
		}
	}
}

// TestOpenAPIAuth: with keys on, the answers of a missing key (401), a key of the wrong
// role (403) and a right one validate against the document, and what it leaves open
// (/healthz, /readyz, /v1/openapi.json) needs no key.
func TestOpenAPIAuth(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	v := newValidator(t, a.URL)
	hc := &http.Client{Transport: v}
	call := func(key, method, path, body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, a.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		key, method, path, body string
		want                    int
	}{
		{"", "POST", "/v1/reserve", `{"max": 1}`, 401},
		{"", "GET", "/metrics", "", 401},
		{a.key["consumer"], "GET", "/v1/cluster", "", 403},
		{a.key["consumer"], "POST", "/v1/submissions", `{"chunks": ["a"]}`, 403},
		{a.key["admin"], "GET", "/v1/cluster", "", 200},
		{a.key["metrics"], "GET", "/metrics", "", 200},
		{a.key["producer"], "POST", "/v1/submissions", `{"chunks": ["a"]}`, 201},
		{"", "GET", "/v1/openapi.json", "", 200},
		{"", "GET", "/healthz", "", 200},
		{"", "GET", "/readyz", "", 200},
		{"", "HEAD", "/healthz", "", 200},
		{"", "HEAD", "/readyz", "", 200},
	} {
		if got := call(c.key, c.method, c.path, c.body); got != c.want {
			t.Errorf("%s %s (key %t): %d; want %d", c.method, c.path, c.key != "", got, c.want)
		}
	}
}

// TestOpenAPILifecycleRequests: the lifecycle fields of a submission, a fail's
// retry_after, and the refusals of the lifecycle routes validate against the document
// (TestOpenAPIRun has the routes' answers, once the engine serves them).
func TestOpenAPILifecycleRequests(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	v := newValidator(t, e.URL)
	hc := &http.Client{Transport: v}
	call := func(ctx context.Context, method, path, contentType, body string, want int) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, e.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body == "" {
			req.Body, req.GetBody, req.ContentLength = http.NoBody, nil, 0
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d %s; want %d", method, path, resp.StatusCode, b, want)
		}
	}
	ctx, bad := t.Context(), context.WithValue(t.Context(), invalidKey{}, true)
	const js, nd = "application/json", "application/x-ndjson"
	call(ctx, "POST", "/v1/submissions", js, `{"chunks": ["a"], "on_failure": {"fail_after": {"chunks": 3}},
		"retry_backoff": {"initial": "0s", "factor": 1.5, "max": "1m"}, "not_before": "2026-01-01T00:00:00Z"}`, 201)
	call(ctx, "POST", "/v1/submissions", nd, "{\"on_failure\": \"continue\", \"retry_backoff\": {}, \"not_before\": \"10m\"}\n\"a\"\n", 201)
	call(ctx, "POST", "/v1/submissions", js, `{"chunks": ["a"], "on_failure": {"fail_after": {"fraction": 0.5}}}`, 201)
	call(ctx, "POST", "/v1/fail", js, `{"failures": [{"token": "forged", "error": "429", "retry_after": "30s"}]}`, 200)
	call(bad, "POST", "/v1/submissions", js, `{"chunks": ["a"], "on_failure": "sometimes"}`, 400)
	call(bad, "POST", "/v1/submissions", js, `{"chunks": ["a"], "on_failure": {"fail_after": {"fraction": 2}}}`, 400)
	call(bad, "POST", "/v1/submissions", js, `{"chunks": ["a"], "retry_backoff": {"factor": 0}}`, 400)
	call(bad, "POST", "/v1/submissions", js, `{"chunks": ["a"], "retry_backoff": {"jitter": 1}}`, 400)
	call(bad, "GET", "/v1/submissions/1/failures?limit=0", "", "", 400)
	call(bad, "GET", "/v1/submissions/1/results?follow=maybe", "", "", 400)
	call(bad, "POST", "/v1/submissions/1/retry", js, `{"chunks": "all"}`, 400)
	call(bad, "POST", "/v1/submissions/retry", js, `{"limit": 1001}`, 400)
	call(bad, "POST", "/v1/submissions/retry", js, `{"state": "done"}`, 400)
}

// TestOpenAPIErrorCodes: the ErrorCode enum of the document is exactly the codes the
// server answers: every Code: "…" of the api package and its dashboard, and every code
// an error of echo's can get (statusCode).
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil {
		t.Fatal("api/openapi.yaml has no ErrorCode schema")
	}
	documented := map[string]bool{}
	for _, v := range ref.Value.Enum {
		documented[fmt.Sprint(v)] = true
	}
	used := map[string]string{} // code: where
	fset := token.NewFileSet()
	for _, dir := range []string{".", "ui"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				kv, ok := n.(*ast.KeyValueExpr)
				if !ok {
					return true
				}
				key, ok := kv.Key.(*ast.Ident)
				lit, isLit := kv.Value.(*ast.BasicLit)
				if ok && key.Name == "Code" && isLit && lit.Kind == token.STRING {
					code, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					used[code] = fset.Position(lit.Pos()).String()
				}
				return true
			})
		}
	}
	for status := 400; status < 600; status++ {
		used[statusCode(status)] = fmt.Sprintf("statusCode(%d)", status)
	}
	if len(used) < 15 {
		t.Fatalf("found %d error codes in the server: %v; the walk of the code is broken", len(used), used)
	}
	for code, where := range used {
		if !documented[code] {
			t.Errorf("%s answers the error code %q; the ErrorCode enum of api/openapi.yaml does not list it", where, code)
		}
	}
	for code := range documented {
		if _, ok := used[code]; !ok {
			t.Errorf("the ErrorCode enum of api/openapi.yaml lists %q; no code of the server answers it", code)
		}
	}
}

// TestOpenAPIServers: the served document's servers is the instance's advertise URL, and
// nothing else of the document changes (the int64 bounds stay exact).
func TestOpenAPIServers(t *testing.T) {
	t.Parallel()
	const advertise = "https://opsq-3.internal:3999"
	e := setup(t, Config{AdvertiseURL: advertise})
	r := getPath(t, e, "/v1/openapi.json")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %d %s; want 200", r.Status, r.Body)
	}
	doc := loadOpenAPIData(t, r.Body)
	if len(doc.Servers) != 1 || doc.Servers[0].URL != advertise {
		t.Errorf("GET /v1/openapi.json with AdvertiseURL %s: servers %v; want that URL alone", advertise, doc.Servers)
	}
	if !bytes.Contains(r.Body, []byte(`"minimum":-9223372036854775807`)) {
		t.Errorf("GET /v1/openapi.json: the minimum of priority is no longer -9223372036854775807 exactly")
	}
	plain, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	if got := loadOpenAPIData(t, plain); len(got.Paths.Map()) != len(doc.Paths.Map()) {
		t.Errorf("GET /v1/openapi.json: %d paths; the document has %d", len(doc.Paths.Map()), len(got.Paths.Map()))
	}
}

// TestOpenAPIJSON: the served JSON is the YAML document, value for value, with the keys
// in the file's order: Prism matches a request's Content-Type to the first media type
// that fits, so the submission's application/x-ndjson must come before its */*.
func TestOpenAPIJSON(t *testing.T) {
	t.Parallel()
	raw, err := openAPIJSON()
	if err != nil {
		t.Fatal(err)
	}
	var fromYAML any
	if err := yaml.Unmarshal(openAPIYAML, &fromYAML); err != nil {
		t.Fatal(err)
	}
	viaJSON, err := json.Marshal(fromYAML)
	if err != nil {
		t.Fatalf("the YAML document does not convert to JSON the plain way: %v", err)
	}
	var want, got any
	if err := json.Unmarshal(viaJSON, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("GET /v1/openapi.json is not JSON: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the served JSON differs from the YAML document")
	}
	submit := raw[bytes.Index(raw, []byte(`"/v1/submissions":`)):]
	nd, star := bytes.Index(submit, []byte(`"application/x-ndjson"`)), bytes.Index(submit, []byte(`"*/*"`))
	if nd < 0 || star < 0 || nd > star {
		t.Errorf("POST /v1/submissions: application/x-ndjson at %d, */* at %d in the served JSON; want the NDJSON type first", nd, star)
	}
	if p, r := bytes.Index(raw, []byte(`"/v1/submissions":`)), bytes.Index(raw, []byte(`"/v1/reserve":`)); p > r {
		t.Errorf("the served JSON lists /v1/reserve before /v1/submissions; want the file's order")
	}
}
