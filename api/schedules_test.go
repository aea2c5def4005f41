package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

// TestSchedulesRoutes: a producer makes, reads, pauses, triggers, backfills and deletes its
// tenant's schedule, every answer as api/openapi.yaml has it; another tenant's producer
// does not see it; a consumer key gets 403.
func TestSchedulesRoutes(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	v := newValidator(t, a.URL)
	hc := &http.Client{Transport: v}
	call := func(key, method, path, body string) reply {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, a.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	expect := func(r reply, status int, v any) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("status %d (%s); want %d", r.Status, r.Body, status)
		}
		if v != nil {
			if err := json.Unmarshal(r.Body, v); err != nil {
				t.Fatalf("decoding %s: %v", r.Body, err)
			}
		}
	}
	producer, other := a.key["producer"], a.key["producer2"]
	body := `{"name": "nightly-import", "cron": "0 2 * * *", "timezone": "Europe/Amsterdam",
		"submission": {"prefix": "s3://bucket/{{.Date}}/", "chunk_count": 10, "metadata": "import {{.Time}}"}}`
	var sc wire.Schedule
	expect(call(producer, "POST", "/v1/schedules", body), http.StatusCreated, &sc)
	if len(sc.NextRuns) != 3 || sc.Overlap != "skip" || sc.CatchUp != "none" || sc.Tenant != "default" {
		t.Errorf("created %+v; want 3 next runs, overlap skip, catch_up none, tenant default", sc)
	}
	ams, _ := time.LoadLocation("Europe/Amsterdam")
	for _, r := range sc.NextRuns {
		if l := r.In(ams); l.Hour() != 2 || l.Minute() != 0 {
			t.Errorf("next run %s is %s in Amsterdam; want 02:00", r, l)
		}
	}
	expectError(t, call(producer, "POST", "/v1/schedules", body), http.StatusConflict, "already_exists", "name")
	expectError(t, call(other, "GET", "/v1/schedules/nightly-import", ""), http.StatusNotFound, "not_found", "name")

	var run wire.ScheduleRun
	expect(call(producer, "POST", "/v1/schedules/nightly-import/trigger", ""), http.StatusOK, &run)
	if run.Outcome != "submitted" || run.SubmissionID == "" {
		t.Fatalf("trigger: %+v; want submitted", run)
	}
	var st wire.Status
	expect(call(producer, "GET", "/v1/submissions/"+run.SubmissionID, ""), http.StatusOK, &st)
	if want := "import " + run.ScheduledAt.In(ams).Format(time.RFC3339); st.Metadata != want {
		t.Errorf("the run's metadata %q; want %q", st.Metadata, want)
	}
	expect(call(producer, "GET", "/v1/schedules/nightly-import", ""), http.StatusOK, &sc)
	if len(sc.LastRuns) != 1 || sc.LastRuns[0].SubmissionID != run.SubmissionID || sc.LastSubmissionID == nil {
		t.Errorf("last_runs %+v; want the trigger's run", sc.LastRuns)
	}
	expect(call(producer, "POST", "/v1/schedules/nightly-import/pause", ""), http.StatusOK, &sc)
	if !sc.Paused {
		t.Error("paused: false after pause")
	}
	expect(call(producer, "POST", "/v1/schedules/nightly-import/resume", ""), http.StatusOK, &sc)
	var runs wire.ScheduleRuns
	from, to := time.Now().AddDate(0, 0, -3).UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339)
	expect(call(producer, "POST", "/v1/schedules/nightly-import/backfill", `{"from": "`+from+`", "to": "`+to+`"}`), http.StatusOK, &runs)
	if n := len(runs.Runs); n < 2 || n > 3 {
		t.Errorf("backfill of 3 days made %d runs; want 2 or 3 (one a day at 02:00)", n)
	}
	metrics := a.call(t, a.key["metrics"], "GET", "/metrics", "")
	if want := `opsq_schedule_runs_total{outcome="submitted"} ` + strconv.Itoa(1+len(runs.Runs)); !strings.Contains(string(metrics.Body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
	var list wire.ScheduleList
	expect(call(producer, "GET", "/v1/schedules", ""), http.StatusOK, &list)
	if len(list.Schedules) != 1 {
		t.Errorf("list: %d schedules; want 1", len(list.Schedules))
	}
	expect(call(other, "GET", "/v1/schedules", ""), http.StatusOK, &list)
	if len(list.Schedules) != 0 {
		t.Errorf("another tenant's list: %d schedules; want none", len(list.Schedules))
	}
	put := `{"cron": "@every 1h", "submission": {"chunks": ["a"]}, "overlap": "allow"}`
	expect(call(producer, "PUT", "/v1/schedules/nightly-import", put), http.StatusOK, &sc)
	if sc.Cron != "@every 1h" || sc.Overlap != "allow" {
		t.Errorf("replaced: %+v; want @every 1h, overlap allow", sc)
	}
	expect(call(producer, "DELETE", "/v1/schedules/nightly-import", ""), http.StatusNoContent, nil)
	expectError(t, call(producer, "GET", "/v1/schedules/nightly-import", ""), http.StatusNotFound, "not_found")

	consumer := a.key["consumer"]
	for _, r := range []struct{ method, path string }{
		{"POST", "/v1/schedules"}, {"GET", "/v1/schedules"}, {"GET", "/v1/schedules/x"}, {"DELETE", "/v1/schedules/x"},
		{"POST", "/v1/schedules/x/trigger"},
	} {
		got := a.call(t, consumer, r.method, r.path, "")
		expectError(t, got, http.StatusForbidden, "forbidden")
	}
}

// TestSchedulesRefuseBadInput: a bad cron, time zone, name or template is a 400 naming the
// field, and nothing is made.
func TestSchedulesRefuseBadInput(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	producer := a.key["producer"]
	ok := `"submission": {"chunks": ["a"]}`
	for _, c := range []struct {
		name, body, field string
	}{
		{"cron missing", `{"name": "a", ` + ok + `}`, "cron"},
		{"cron bad", `{"name": "a", "cron": "61 * * * *", ` + ok + `}`, "cron"},
		{"cron 7 fields", `{"name": "a", "cron": "0 0 0 * * * *", ` + ok + `}`, "cron"},
		{"cron under a second", `{"name": "a", "cron": "@every 500ms", ` + ok + `}`, "cron"},
		{"cron not whole seconds", `{"name": "a", "cron": "@every 1500ms", ` + ok + `}`, "cron"},
		{"cron TZ", `{"name": "a", "cron": "TZ=UTC 0 2 * * *", ` + ok + `}`, "cron"},
		{"timezone", `{"name": "a", "cron": "@hourly", "timezone": "Mars/Olympus", ` + ok + `}`, "timezone"},
		{"name empty", `{"name": "", "cron": "@hourly", ` + ok + `}`, "name"},
		{"name long", `{"name": "` + strings.Repeat("n", 129) + `", "cron": "@hourly", ` + ok + `}`, "name"},
		{"name slash", `{"name": "a/b", "cron": "@hourly", ` + ok + `}`, "name"},
		{"overlap", `{"name": "a", "cron": "@hourly", "overlap": "maybe", ` + ok + `}`, "overlap"},
		{"catch_up", `{"name": "a", "cron": "@hourly", "catch_up": "all", ` + ok + `}`, "catch_up"},
		{"submission missing", `{"name": "a", "cron": "@hourly"}`, "submission"},
		{"submission not object", `{"name": "a", "cron": "@hourly", "submission": [1]}`, "submission"},
		{"template does not parse", `{"name": "a", "cron": "@hourly", "submission": {"metadata": "{{.Time", "chunks": []}}`, "submission.metadata"},
		{"template names another field", `{"name": "a", "cron": "@hourly", "submission": {"prefix": "s3://b/{{.Host}}/", "chunk_count": 1}}`, "submission.prefix"},
		{"template key", `{"name": "a", "cron": "@hourly", "submission": {"idempotency_key": "{{.Date", "chunks": []}}`, "submission.idempotency_key"},
		{"submission field", `{"name": "a", "cron": "@hourly", "submission": {"priority": "high"}}`, "submission.priority"},
		{"submission unknown", `{"name": "a", "cron": "@hourly", "submission": {"colour": "red"}}`, "submission.colour"},
		{"submission prefix without count", `{"name": "a", "cron": "@hourly", "submission": {"prefix": "s3://x/"}}`, "submission.chunk_count"},
		{"submission after", `{"name": "a", "cron": "@hourly", "submission": {"after": ["1"]}}`, "submission.after"},
		{"submission tenant", `{"name": "a", "cron": "@hourly", "submission": {"tenant": "beta"}}`, "submission.tenant"},
		{"submission chunk", `{"name": "a", "cron": "@hourly", "submission": {"chunks": [1]}}`, "submission.chunks[0]"},
		{"unknown field", `{"name": "a", "cron": "@hourly", "colour": "red", ` + ok + `}`, "colour"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := a.call(t, producer, "POST", "/v1/schedules", c.body)
			expectError(t, got, http.StatusBadRequest, "bad_request", c.field)
			var e wire.ErrorBody
			if json.Unmarshal(got.Body, &e) == nil && !strings.HasPrefix(e.Error.Message, c.field) {
				t.Errorf("message %q; want it to start with the field %s", e.Error.Message, c.field)
			}
		})
	}
	got := a.call(t, producer, "GET", "/v1/schedules", "")
	if !strings.Contains(string(got.Body), `"schedules":[]`) {
		t.Errorf("after the refusals: %s; want no schedule", got.Body)
	}
	backfill := a.call(t, producer, "POST", "/v1/schedules", `{"name": "a", "cron": "@hourly", `+ok+`}`)
	if backfill.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", backfill.Status, backfill.Body)
	}
	for _, c := range []struct{ body, field string }{
		{`{"to": "2026-01-01T00:00:00Z"}`, "from"},
		{`{"from": "yesterday", "to": "2026-01-01T00:00:00Z"}`, "from"},
		{`{"from": "2020-01-01T00:00:00Z", "to": "2030-01-01T00:00:00Z"}`, "to"},
		{`{"from": "2020-01-01T00:00:00Z", "to": "2021-01-01T00:00:00Z"}`, "to"},
	} {
		expectError(t, a.call(t, producer, "POST", "/v1/schedules/a/backfill", c.body), http.StatusBadRequest, "bad_request", c.field)
	}
	expectError(t, a.call(t, producer, "POST", "/v1/schedules?tenant=beta", `{"name": "b", "cron": "@hourly", `+ok+`}`), http.StatusForbidden, "forbidden", "tenant")
}

// TestScheduleNamesReachable: every name the API accepts at create is reachable at its
// URL, the name escaped as one path segment (url.PathEscape): read, paused, triggered and
// deleted by that URL, not another schedule's.
func TestScheduleNamesReachable(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	producer := a.key["producer"]
	names := []string{"semi;colon", "per%cent", "per%3Bcent", "q?mark", "hash#tag", "sp ace", "plus+sign", "a=b&c",
		"dot.", "..", "ünï cødé", "back\\slash", "co:lon@at", "tilde~'quote\"", "%2F"}
	for _, name := range names {
		body, _ := json.Marshal(map[string]any{"name": name, "cron": "@hourly", "paused": true, "submission": map[string]any{"chunks": []string{"a"}}})
		if got := a.call(t, producer, "POST", "/v1/schedules", string(body)); got.Status != http.StatusCreated {
			t.Fatalf("create %q: %d %s", name, got.Status, got.Body)
		}
	}
	// The Go client builds the same URLs.
	c := client.New(a.URL, client.WithKey(producer))
	for _, name := range names {
		if sc, err := c.Schedule(t.Context(), "", name); err != nil || sc.Name != name {
			t.Errorf("the Go client's Schedule(%q): %q, %v; want the schedule", name, sc.Name, err)
		}
		if run, err := c.TriggerSchedule(t.Context(), "", name); err != nil || run.SubmissionID == "" {
			t.Errorf("the Go client's TriggerSchedule(%q): %+v, %v; want a run submitted", name, run, err)
		}
	}
	for _, name := range names {
		path := "/v1/schedules/" + url.PathEscape(name)
		got := a.call(t, producer, "GET", path, "")
		var sc wire.Schedule
		if got.Status != http.StatusOK || json.Unmarshal(got.Body, &sc) != nil || sc.Name != name {
			t.Errorf("GET %s: %d %s; want 200 with the schedule %q", path, got.Status, got.Body, name)
			continue
		}
		if got := a.call(t, producer, "POST", path+"/resume", ""); got.Status != http.StatusOK || json.Unmarshal(got.Body, &sc) != nil || sc.Name != name || sc.Paused {
			t.Errorf("POST %s/resume: %d %s; want 200 with %q resumed", path, got.Status, got.Body, name)
		}
		if got := a.call(t, producer, "DELETE", path, ""); got.Status/100 != 2 {
			t.Errorf("DELETE %s: %d %s; want it deleted", path, got.Status, got.Body)
		}
		if got := a.call(t, producer, "GET", path, ""); got.Status != http.StatusNotFound {
			t.Errorf("GET %s after its delete: %d %s; want 404", path, got.Status, got.Body)
		}
	}
}
