package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"opsq/queuer"
)

// The lifecycle fields of a submission, and the bad input of the routes of failures,
// retry, pause and resume: each bad input is a 400 whose message starts with its field.

// expectFieldError checks a 400 bad_request whose message starts with "field:".
func expectFieldError(t *testing.T, r reply, field string) {
	t.Helper()
	expectError(t, r, http.StatusBadRequest, "bad_request", field)
	var body struct{ Error struct{ Message string } }
	if err := json.Unmarshal(r.Body, &body); err == nil && !strings.HasPrefix(body.Error.Message, field+":") {
		t.Errorf("message %q; want it to start with %q", body.Error.Message, field+":")
	}
}

func TestSubmitLifecycleRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	for _, tc := range []struct {
		field, value, wantField string
	}{
		{"on_failure", `"sometimes"`, "on_failure"},
		{"on_failure", `"Continue"`, "on_failure"},
		{"on_failure", `42`, "on_failure"},
		{"on_failure", `[]`, "on_failure"},
		{"on_failure", `{}`, "on_failure"},
		{"on_failure", `{"fail_later": {"chunks": 1}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"chunks": 1}, "then": 2}`, "on_failure"},
		{"on_failure", `{"fail_after": {}}`, "on_failure"},
		{"on_failure", `{"fail_after": 3}`, "on_failure"},
		{"on_failure", `{"fail_after": {"chunks": -1}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"chunks": 1.5}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"chunks": "3"}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"chunks": 2147483648}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"fraction": 0}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"fraction": -0.5}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"fraction": 1.01}}`, "on_failure"},
		{"on_failure", `{"fail_after": {"chunks": 1, "fraction": 0.5}}`, "on_failure"},
		{"retry_backoff", `"1s"`, "retry_backoff"},
		{"retry_backoff", `[]`, "retry_backoff"},
		{"retry_backoff", `{"initial": "-1s"}`, "retry_backoff.initial"},
		{"retry_backoff", `{"initial": "25h", "max": "24h"}`, "retry_backoff.initial"},
		{"retry_backoff", `{"initial": 5}`, "retry_backoff.initial"},
		{"retry_backoff", `{"initial": "soon"}`, "retry_backoff.initial"},
		{"retry_backoff", `{"max": "0s"}`, "retry_backoff.max"},
		{"retry_backoff", `{"max": "48h"}`, "retry_backoff.max"},
		{"retry_backoff", `{"initial": "2m"}`, "retry_backoff.max"}, // over the default max, 1m
		{"retry_backoff", `{"initial": "10s", "max": "5s"}`, "retry_backoff.max"},
		{"retry_backoff", `{"factor": 0}`, "retry_backoff.factor"},
		{"retry_backoff", `{"factor": -2}`, "retry_backoff.factor"},
		{"retry_backoff", `{"factor": "2"}`, "retry_backoff.factor"},
		{"retry_backoff", `{"factor": 1e400}`, "retry_backoff.factor"},
		{"retry_backoff", `{"jitter": 0.1}`, "retry_backoff.jitter"},
		{"not_before", `"tomorrow"`, "not_before"},
		{"not_before", `"-5m"`, "not_before"},
		{"not_before", `"721h"`, "not_before"},
		{"not_before", `"2999-01-01T00:00:00Z"`, "not_before"},
		{"not_before", `"2026-13-01T00:00:00Z"`, "not_before"},
		{"not_before", `42`, "not_before"},
	} {
		t.Run(tc.field+" "+tc.value, func(t *testing.T) {
			// Sequential: each checks that nothing is left on the shared database.
			expectFieldError(t, postSubmission(t, e, "application/json", `{"chunks": ["a"], "`+tc.field+`": `+tc.value+`}`), tc.wantField)
			expectFieldError(t, postSubmission(t, e, "application/x-ndjson", `{"`+tc.field+`": `+tc.value+"}\n\"a\"\n"), tc.wantField)
			expectNothingStored(t, e)
		})
	}
	expectHealthy(t, e)
}

func TestParseOnFailure(t *testing.T) {
	t.Parallel()
	k := func(n int64) *int64 { return &n }
	f := func(x float64) *float64 { return &x }
	for _, tc := range []struct {
		in, echo string
		want     queuer.FailurePolicy
	}{
		{`"fail_submission"`, `"fail_submission"`, queuer.FailurePolicy{}},
		{`"continue"`, `"continue"`, queuer.FailurePolicy{Continue: true}},
		{`{"fail_after": {"chunks": 0}}`, `{"fail_after":{"chunks":0}}`, queuer.FailurePolicy{AfterChunks: k(0)}},
		{` { "fail_after" : { "chunks" : 12 } } `, `{"fail_after":{"chunks":12}}`, queuer.FailurePolicy{AfterChunks: k(12)}},
		{`{"fail_after": {"fraction": 0.25}}`, `{"fail_after":{"fraction":0.25}}`, queuer.FailurePolicy{AfterFraction: f(0.25)}},
		{`{"fail_after": {"fraction": 1}}`, `{"fail_after":{"fraction":1}}`, queuer.FailurePolicy{AfterFraction: f(1)}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, echo, err := parseOnFailure(json.RawMessage(tc.in))
			if err != nil {
				t.Fatalf("got error %v; want none", err)
			}
			if string(echo) != tc.echo {
				t.Errorf("echo %s; want %s", echo, tc.echo)
			}
			same := got.Continue == tc.want.Continue &&
				(got.AfterChunks == nil) == (tc.want.AfterChunks == nil) && (got.AfterChunks == nil || *got.AfterChunks == *tc.want.AfterChunks) &&
				(got.AfterFraction == nil) == (tc.want.AfterFraction == nil) && (got.AfterFraction == nil || *got.AfterFraction == *tc.want.AfterFraction)
			if !same {
				t.Errorf("policy %+v; want %+v", got, tc.want)
			}
		})
	}
}

func TestParseBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want queuer.Backoff
	}{
		{`{}`, queuer.Backoff{Initial: time.Second, Factor: 2, Max: time.Minute}},
		{`{"initial": "0s"}`, queuer.Backoff{Initial: 0, Factor: 2, Max: time.Minute}},
		{`{"initial": "5s", "factor": 1.5, "max": "10m"}`, queuer.Backoff{Initial: 5 * time.Second, Factor: 1.5, Max: 10 * time.Minute}},
		{`{"initial": null, "factor": 0.5, "max": "24h"}`, queuer.Backoff{Initial: time.Second, Factor: 0.5, Max: 24 * time.Hour}},
		{`{"initial": "1m", "max": "1m"}`, queuer.Backoff{Initial: time.Minute, Factor: 2, Max: time.Minute}},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseBackoff(json.RawMessage(tc.in))
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseNotBefore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: `"10m"`, want: now.Add(10 * time.Minute)},
		{in: `"0s"`, want: now},
		{in: `"720h"`, want: now.Add(720 * time.Hour)},
		{in: `"720h0m1s"`, bad: true},
		{in: `"2026-03-02T12:00:00+02:00"`, want: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)},
		{in: `"2020-01-01T00:00:00Z"`, want: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}, // past: no wait
		{in: `"2026-03-31T12:00:00Z"`, want: time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)},
		{in: `"2026-03-31T12:00:01Z"`, bad: true},
		{in: `"2026-03-02"`, bad: true},
		{in: `""`, bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseNotBefore(json.RawMessage(tc.in), now)
			switch {
			case tc.bad && err == nil:
				t.Errorf("got %s; want an error", got)
			case tc.bad:
				if !strings.HasPrefix(err.(*Error).Message, "not_before:") {
					t.Errorf("message %q; want it to start with not_before:", err.(*Error).Message)
				}
			case err != nil || !got.Equal(tc.want):
				t.Errorf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestSubmitLifecycleParsed: the fields reach the submission the store is handed (the
// parse of a JSON body, without the database).
func TestSubmitLifecycleParsed(t *testing.T) {
	t.Parallel()
	s := fuzzServer()
	sub, _, err := parseJSONBody(s, []byte(`{"chunks": ["a"], "on_failure": {"fail_after": {"fraction": 0.1}},
		"retry_backoff": {"initial": "0s", "factor": 3, "max": "2m"}, "not_before": "1h"}`))
	if err != nil {
		t.Fatal(err)
	}
	lc := sub.Lifecycle
	if string(lc.OnFailure) != `{"fail_after":{"fraction":0.1}}` || lc.Policy.AfterFraction == nil || *lc.Policy.AfterFraction != 0.1 {
		t.Errorf("on_failure %s, policy %+v; want fail_after fraction 0.1", lc.OnFailure, lc.Policy)
	}
	if lc.Backoff != (queuer.Backoff{Initial: 0, Factor: 3, Max: 2 * time.Minute}) {
		t.Errorf("backoff %+v; want 0s × 3 up to 2m", lc.Backoff)
	}
	if d := time.Until(lc.NotBefore); d < 59*time.Minute || d > time.Hour {
		t.Errorf("not_before %s is %s from now; want 1h", lc.NotBefore, d)
	}
	// None given: the zero Lifecycle, the defaults.
	sub, _, err = parseJSONBody(s, []byte(`{"chunks": ["a"]}`))
	if err != nil || sub.Lifecycle.OnFailure != nil || sub.Lifecycle.Backoff != (queuer.Backoff{}) || !sub.Lifecycle.NotBefore.IsZero() {
		t.Errorf("got %+v, %v; want the zero Lifecycle", sub.Lifecycle, err)
	}
}

func TestFailRetryAfterRefused(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	for _, v := range []string{`"0s"`, `"-1s"`, `"25h"`, `"later"`, `30`, `true`} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			r := httpCall(t, http.MethodPost, e.URL+"/v1/fail", "application/json",
				strings.NewReader(`{"failures": [{"token": "t1", "error": "e"}, {"token": "t2", "error": "e", "retry_after": `+v+`}]}`))
			expectFieldError(t, r, "failures[1].retry_after")
		})
	}
	// A good one passes the checks: the forged token is unknown.
	r := httpCall(t, http.MethodPost, e.URL+"/v1/fail", "application/json",
		strings.NewReader(`{"failures": [{"token": "forged", "error": "e", "retry_after": "24h"}]}`))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"unknown"`) {
		t.Errorf("fail with retry_after 24h: %d %s; want 200 unknown", r.Status, r.Body)
	}
}

func TestLifecycleRoutesRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	post := func(path, body string) reply {
		return httpCall(t, http.MethodPost, e.URL+path, "application/json", strings.NewReader(body))
	}
	for _, tc := range []struct {
		name  string
		call  func() reply
		field string
	}{
		{"failures limit 0", func() reply { return getPath(t, e, "/v1/submissions/"+id+"/failures?limit=0") }, "limit"},
		{"failures limit 1001", func() reply { return getPath(t, e, "/v1/submissions/"+id+"/failures?limit=1001") }, "limit"},
		{"failures limit x", func() reply { return getPath(t, e, "/v1/submissions/"+id+"/failures?limit=x") }, "limit"},
		{"failures after -1", func() reply { return getPath(t, e, "/v1/submissions/"+id+"/failures?after=-1") }, "after"},
		{"failures after x", func() reply { return getPath(t, e, "/v1/submissions/"+id+"/failures?after=x") }, "after"},
		{"results follow maybe", func() reply { return getPath(t, e, "/v1/submissions/"+id+"/results?follow=maybe") }, "follow"},
		{"retry chunks all", func() reply { return post("/v1/submissions/"+id+"/retry", `{"chunks": "all"}`) }, "chunks"},
		{"retry chunks 1", func() reply { return post("/v1/submissions/"+id+"/retry", `{"chunks": 1}`) }, "chunks"},
		{"retry max_retries -1", func() reply { return post("/v1/submissions/"+id+"/retry", `{"max_retries": -1}`) }, "max_retries"},
		{"retry max_retries huge", func() reply { return post("/v1/submissions/"+id+"/retry", `{"max_retries": 1000001}`) }, "max_retries"},
		{"retry unknown field", func() reply { return post("/v1/submissions/"+id+"/retry", `{"budget": 3}`) }, "budget"},
		{"bulk state", func() reply { return post("/v1/submissions/retry", `{"state": "done"}`) }, "state"},
		{"bulk key without value", func() reply { return post("/v1/submissions/retry", `{"key": "k"}`) }, "value"},
		{"bulk value without key", func() reply { return post("/v1/submissions/retry", `{"value": 1}`) }, "key"},
		{"bulk empty key", func() reply { return post("/v1/submissions/retry", `{"key": "", "value": 1}`) }, "key"},
		{"bulk value list", func() reply { return post("/v1/submissions/retry", `{"key": "k", "value": [1]}`) }, "value"},
		{"bulk value float", func() reply { return post("/v1/submissions/retry", `{"key": "k", "value": 1.5}`) }, "value"},
		{"bulk limit 0", func() reply { return post("/v1/submissions/retry", `{"limit": 0}`) }, "limit"},
		{"bulk limit 1001", func() reply { return post("/v1/submissions/retry", `{"limit": 1001}`) }, "limit"},
		{"bulk chunks", func() reply { return post("/v1/submissions/retry", `{"chunks": "skipped"}`) }, "chunks"},
		{"bulk max_retries", func() reply { return post("/v1/submissions/retry", `{"max_retries": -3}`) }, "max_retries"},
		{"bulk unknown field", func() reply { return post("/v1/submissions/retry", `{"tenant_id": 3}`) }, "tenant_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expectFieldError(t, tc.call(), tc.field)
		})
	}
	// Nothing of it touched the submission.
	st := statusOf(t, e, id)
	expectField(t, st, "state", `"in_progress"`)
	expectField(t, st, "paused", "false")
}
