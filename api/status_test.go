package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/sql/pgtest"
)

func TestStatusShape(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	before := time.Now().Add(-time.Minute)
	id := mustSubmit(t, e, `{
		"chunks": ["a", "b"],
		"metadata": "m \"q\"",
		"strategic_metadata": {"int": 42, "str": "42", "big": 9007199254740993, "min": -9223372036854775808, "max": 9223372036854775807, "empty": ""},
		"priority": 9223372036854775807
	}`, 2)
	r := getPath(t, e, "/v1/submissions/"+id)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d (%s); want 200", r.Status, r.Body)
	}
	expectJSONType(t, r)
	st := decodeObject(t, r.Body)

	want := []string{"chunks_done", "chunks_failed", "chunks_skipped", "chunks_total", "created_at", "finished_at", "id", "metadata",
		"not_before", "on_failure", "paused", "priority", "state", "strategic_metadata", "tenant"}
	if got := sortedKeys(st); !slices.Equal(got, want) {
		t.Errorf("fields %q; want %q (no failure while in progress)", got, want)
	}
	expectField(t, st, "id", `"`+id+`"`)
	expectField(t, st, "state", `"in_progress"`)
	expectField(t, st, "chunks_total", "2")
	expectField(t, st, "chunks_done", "0")
	expectField(t, st, "chunks_failed", "0")
	expectField(t, st, "priority", "9223372036854775807")
	expectField(t, st, "metadata", `"m \"q\""`)
	expectField(t, st, "finished_at", "null")
	expectField(t, st, "tenant", `"default"`)
	expectField(t, st, "paused", "false")
	expectField(t, st, "chunks_skipped", "0")
	expectField(t, st, "on_failure", `"fail_submission"`)
	expectField(t, st, "not_before", "null")

	// Values keep their JSON types and exact digits.
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(st["strategic_metadata"], &meta); err != nil {
		t.Fatalf("strategic_metadata %s: %v", st["strategic_metadata"], err)
	}
	for key, raw := range map[string]string{
		"int": `42`, "str": `"42"`, "big": `9007199254740993`,
		"min": `-9223372036854775808`, "max": `9223372036854775807`, "empty": `""`,
	} {
		if got := string(meta[key]); got != raw {
			t.Errorf("strategic_metadata.%s = %s; want %s", key, got, raw)
		}
	}

	created, err := time.Parse(time.RFC3339Nano, jsonString(t, st["created_at"]))
	if err != nil {
		t.Fatalf("created_at %s: want RFC 3339 (%v)", st["created_at"], err)
	}
	if created.Before(before) || created.After(time.Now().Add(time.Minute)) {
		t.Errorf("created_at %s; want about now", created)
	}

	// Once finished, finished_at is a time too.
	pgtest.CompleteSubmission(t, e.Pool, mustInt64(t, id))
	st = statusOf(t, e, id)
	expectField(t, st, "state", `"completed"`)
	expectField(t, st, "chunks_done", "2")
	finished, err := time.Parse(time.RFC3339Nano, jsonString(t, st["finished_at"]))
	if err != nil {
		t.Fatalf("finished_at %s: want RFC 3339 (%v)", st["finished_at"], err)
	}
	if finished.Before(created) {
		t.Errorf("finished_at %s before created_at %s", finished, created)
	}
}

func TestBadAndUnknownIDs(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	// An unknown id is a valid one that was never handed out.
	unknown := fmt.Sprint(mustInt64(t, mustSubmit(t, e, `{"chunks": ["a"]}`, 1)) + 1000)
	routes := []struct {
		method, format string
	}{
		{http.MethodGet, "/v1/submissions/%s"},
		{http.MethodGet, "/v1/submissions/%s?wait=1s"},
		{http.MethodGet, "/v1/submissions/%s/results"},
		{http.MethodGet, "/v1/submissions/%s/results?follow=true"},
		{http.MethodGet, "/v1/submissions/%s/failures"},
		{http.MethodPost, "/v1/submissions/%s/cancel"},
		{http.MethodPost, "/v1/submissions/%s/retry"},
		{http.MethodPost, "/v1/submissions/%s/pause"},
		{http.MethodPost, "/v1/submissions/%s/resume"},
	}
	for _, route := range routes {
		for _, id := range []string{"abc", "-1", "0", "1.5", "9223372036854775808", "99999999999999999999", "1e3", "%20"} {
			path := fmt.Sprintf(route.format, id)
			t.Run(route.method+" "+path, func(t *testing.T) {
				t.Parallel()
				r := httpCall(t, route.method, e.URL+path, "", nil)
				expectError(t, r, http.StatusBadRequest, "bad_request", "id")
			})
		}
		path := fmt.Sprintf(route.format, unknown)
		t.Run(route.method+" unknown", func(t *testing.T) {
			t.Parallel()
			r := httpCall(t, route.method, e.URL+path, "", nil)
			expectError(t, r, http.StatusNotFound, "not_found", "id")
		})
	}
}

func TestStatusWait(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	done := mustSubmit(t, e, `{"chunks": []}`, 0)

	for _, wait := range []string{"x", "-1s", "61s", "1", "1h", "%20"} {
		t.Run("wait="+wait, func(t *testing.T) {
			t.Parallel()
			r := getPath(t, e, "/v1/submissions/"+id+"?wait="+wait)
			expectError(t, r, http.StatusBadRequest, "bad_request", "wait")
		})
	}
	t.Run("runs out on an in-progress submission", func(t *testing.T) {
		t.Parallel()
		st := statusOf(t, e, id+"?wait=200ms")
		expectField(t, st, "state", `"in_progress"`)
		expectField(t, st, "finished_at", "null")
	})
	t.Run("returns at once when finished", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second) // far under the 60s asked for
		defer cancel()
		r := httpCallContext(t, ctx, http.MethodGet, e.URL+"/v1/submissions/"+done+"?wait=60s", "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d (%s); want 200", r.Status, r.Body)
		}
		expectField(t, decodeObject(t, r.Body), "state", `"completed"`)
	})
}

// TestStatusWaitWokenByCancel: a long poll ends when another request cancels the
// submission, long before its wait runs out.
func TestStatusWaitWokenByCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b"]}`, 2)

	// The deadline is far under the 30 s wait: only a wake-up ends the GET in time.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	sent := make(chan struct{})
	var once sync.Once
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(sent) }) },
	})
	got := make(chan reply, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/v1/submissions/"+id+"?wait=30s", nil)
		if err != nil {
			got <- reply{Body: []byte(err.Error())}
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- reply{Body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			b = []byte(err.Error())
		}
		got <- reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}()
	select {
	case <-sent:
	case <-ctx.Done():
		t.Fatal("the waiting GET was never sent")
	}
	r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/cancel", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("cancel: status %d (%s); want 200", r.Status, r.Body)
	}
	w := <-got
	if w.Status != http.StatusOK {
		t.Fatalf("waiting GET: status %d (%s); want 200 woken by the cancel", w.Status, w.Body)
	}
	expectField(t, decodeObject(t, w.Body), "state", `"cancelled"`)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b", "c"], "strategic_metadata": {"k": 1}}`, 3)

	r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/cancel", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("cancel: status %d (%s); want 200", r.Status, r.Body)
	}
	expectJSONType(t, r)
	st := decodeObject(t, r.Body)
	expectField(t, st, "id", `"`+id+`"`)
	expectField(t, st, "state", `"cancelled"`)
	expectField(t, st, "chunks_total", "3")
	expectField(t, st, "strategic_metadata", `{"k": 1}`)
	if string(st["finished_at"]) == "null" {
		t.Errorf("finished_at null after cancel; want a time")
	}
	expectField(t, statusOf(t, e, id), "state", `"cancelled"`)
	if n := pgtest.Count(t, e.Pool, "SELECT count(*) FROM opsq.chunks WHERE submission_id = $1::bigint", id); n != 0 {
		t.Errorf("%d reservable chunks left after cancel; want 0", n)
	}

	r = httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/cancel", "", nil)
	expectError(t, r, http.StatusConflict, "already_finished")

	// A completed submission cannot be cancelled either.
	done := mustSubmit(t, e, `{}`, 0)
	r = httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+done+"/cancel", "", nil)
	expectError(t, r, http.StatusConflict, "already_finished")
	expectField(t, statusOf(t, e, done), "state", `"completed"`)
}

func TestResults(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})

	// Results in any state (DESIGN.md §3): a line per chunk, its output or its state.
	t.Run("in progress", func(t *testing.T) {
		t.Parallel()
		id := mustSubmit(t, e, `{"chunks": ["a", "b"]}`, 2)
		expectResultLines(t, getPath(t, e, "/v1/submissions/"+id+"/results"),
			`{"chunk_index":0,"state":"pending"}`, `{"chunk_index":1,"state":"pending"}`)
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
		if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/cancel", "", nil); r.Status != http.StatusOK {
			t.Fatalf("cancel: status %d; want 200", r.Status)
		}
		expectResultLines(t, getPath(t, e, "/v1/submissions/"+id+"/results"), `{"chunk_index":0,"state":"skipped"}`)
	})
	t.Run("zero chunks", func(t *testing.T) {
		t.Parallel()
		id := mustSubmit(t, e, `{"chunks": []}`, 0)
		r := getPath(t, e, "/v1/submissions/"+id+"/results")
		if r.Status != http.StatusOK {
			t.Fatalf("status %d (%s); want 200", r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type %q; want application/x-ndjson", ct)
		}
		if len(r.Body) != 0 {
			t.Errorf("body %q; want empty", r.Body)
		}
	})
	t.Run("completed", func(t *testing.T) {
		t.Parallel()
		const n = 300 // more chunks than shards, so that order is not an accident
		chunks := make([]string, n)
		for i := range chunks {
			chunks[i] = fmt.Sprintf("%q", fmt.Sprint("in-", i))
		}
		id := mustSubmit(t, e, `{"chunks": [`+strings.Join(chunks, ",")+`]}`, n)
		pgtest.CompleteSubmission(t, e.Pool, mustInt64(t, id))
		// One output that JSON must escape, and HTML-ish text that it need not.
		if _, err := e.Pool.Exec(t.Context(),
			"UPDATE opsq.completed_batches SET outputs[array_position(chunk_indexes, 7)] = convert_to(E'<b>&\"q\"\\\\ é\\n', 'UTF8') WHERE submission_id = $1 AND 7 = ANY(chunk_indexes)",
			mustInt64(t, id)); err != nil {
			t.Fatal(err)
		}
		r := getPath(t, e, "/v1/submissions/"+id+"/results")
		if r.Status != http.StatusOK {
			t.Fatalf("status %d (%s); want 200", r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("Content-Type %q; want application/x-ndjson", ct)
		}
		if !strings.HasSuffix(string(r.Body), "\n") {
			t.Errorf("body does not end with a newline")
		}
		lines := strings.Split(strings.TrimSuffix(string(r.Body), "\n"), "\n")
		if len(lines) != n {
			t.Fatalf("%d lines; want %d", len(lines), n)
		}
		for i, line := range lines {
			fields := decodeObject(t, []byte(line))
			if got := sortedKeys(fields); !slices.Equal(got, []string{"chunk_index", "output"}) {
				t.Fatalf("line %d has fields %q; want chunk_index and output", i+1, got)
			}
			expectField(t, fields, "chunk_index", fmt.Sprint(i))
			want := fmt.Sprint("out-", i)
			if i == 7 {
				want = "<b>&\"q\"\\ é\n"
			}
			if got := jsonString(t, fields["output"]); got != want {
				t.Errorf("line %d output %q; want %q", i+1, got, want)
			}
		}
		if want := `{"chunk_index":7,"output":"<b>&\"q\"\\ é\n"}`; lines[7] != want {
			t.Errorf("line 8 is %s; want %s (no HTML escaping)", lines[7], want)
		}
	})
}

// listPage is one page of GET /v1/submissions, ids only.
type listPage struct {
	IDs       []string
	NextAfter *string
}

func listSubmissions(t *testing.T, e *env, query string) listPage {
	t.Helper()
	r := getPath(t, e, "/v1/submissions?"+query)
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/submissions?%s: status %d (%s); want 200", query, r.Status, r.Body)
	}
	expectJSONType(t, r)
	page := decodeObject(t, r.Body)
	if got := sortedKeys(page); !slices.Equal(got, []string{"next_after", "submissions"}) {
		t.Fatalf("fields %q; want next_after and submissions", got)
	}
	var subs []map[string]json.RawMessage
	if err := json.Unmarshal(page["submissions"], &subs); err != nil || subs == nil {
		t.Fatalf("submissions %s; want an array (never null)", page["submissions"])
	}
	var out listPage
	for _, s := range subs {
		out.IDs = append(out.IDs, jsonString(t, s["id"]))
	}
	if string(page["next_after"]) != "null" {
		next := jsonString(t, page["next_after"])
		out.NextAfter = &next
	}
	return out
}

func TestListNewestFirstAndPages(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	if p := listSubmissions(t, e, ""); len(p.IDs) != 0 || p.NextAfter != nil {
		t.Fatalf("empty database: %+v; want no submissions and next_after null", p)
	}
	var ids []string
	for i := range 5 {
		ids = append(ids, mustSubmit(t, e, fmt.Sprintf(`{"chunks": ["%d"]}`, i), 1))
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)

	if p := listSubmissions(t, e, ""); !slices.Equal(p.IDs, newestFirst) || p.NextAfter != nil {
		t.Fatalf("one page: %+v; want %q and next_after null", p, newestFirst)
	}

	for _, n := range []int{5, 4} { // a last page that is full, and one that is not
		t.Run(fmt.Sprintf("limit 2 over %d", n), func(t *testing.T) {
			t.Parallel()
			want := newestFirst[len(newestFirst)-n:]
			var walked []string
			after, pages := "", 0
			for {
				q := "limit=2"
				if after != "" {
					q += "&after=" + after
				} else if n < 5 {
					q += "&after=" + ids[n] // start below the newest one
				}
				p := listSubmissions(t, e, q)
				pages++
				if len(p.IDs) > 2 {
					t.Fatalf("page %d has %d submissions; want at most 2", pages, len(p.IDs))
				}
				walked = append(walked, p.IDs...)
				if p.NextAfter == nil {
					break
				}
				if *p.NextAfter != p.IDs[len(p.IDs)-1] {
					t.Fatalf("next_after %s; want the last id of the page, %s", *p.NextAfter, p.IDs[len(p.IDs)-1])
				}
				if pages > 10 {
					t.Fatal("more than 10 pages")
				}
				after = *p.NextAfter
			}
			if !slices.Equal(walked, want) {
				t.Fatalf("pages walked %q; want %q", walked, want)
			}
			if wantPages := (n + 1) / 2; pages != wantPages {
				t.Errorf("%d pages; want %d (next_after null on the last full page)", pages, wantPages)
			}
		})
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	intID := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": 42, "mode": "preview"}}`, 1)
	strID := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": "42"}}`, 1)
	otherID := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": 7, "mode": "final"}}`, 1)
	doneID := mustSubmit(t, e, `{"chunks": [], "strategic_metadata": {"company_id": 42}}`, 0)
	if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+otherID+"/cancel", "", nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: status %d; want 200", r.Status)
	}

	cases := []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"all", url.Values{}, []string{doneID, otherID, strID, intID}},
		{"in_progress", url.Values{"state": {"in_progress"}}, []string{strID, intID}},
		{"completed", url.Values{"state": {"completed"}}, []string{doneID}},
		{"cancelled", url.Values{"state": {"cancelled"}}, []string{otherID}},
		{"failed", url.Values{"state": {"failed"}}, nil},
		{"integer 42", url.Values{"key": {"company_id"}, "value": {"42"}}, []string{doneID, intID}},
		{"string 42", url.Values{"key": {"company_id"}, "value": {`"42"`}}, []string{strID}},
		{"integer 042", url.Values{"key": {"company_id"}, "value": {"042"}}, []string{doneID, intID}},
		{"integer +42", url.Values{"key": {"company_id"}, "value": {"+42"}}, []string{doneID, intID}},
		{"integer 42 in progress", url.Values{"key": {"company_id"}, "value": {"42"}, "state": {"in_progress"}}, []string{intID}},
		{"bare string", url.Values{"key": {"mode"}, "value": {"preview"}}, []string{intID}},
		{"quoted string", url.Values{"key": {"mode"}, "value": {`"final"`}}, []string{otherID}},
		{"no match", url.Values{"key": {"company_id"}, "value": {"43"}}, nil},
		{"unknown key", url.Values{"key": {"nope"}, "value": {"42"}}, nil},
		{"limit 1", url.Values{"key": {"company_id"}, "value": {"42"}, "limit": {"1"}}, []string{doneID}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := listSubmissions(t, e, tc.query.Encode())
			if !slices.Equal(p.IDs, tc.want) {
				t.Errorf("ids %q; want %q", p.IDs, tc.want)
			}
			if tc.query.Get("limit") == "" && p.NextAfter != nil {
				t.Errorf("next_after %s; want null", *p.NextAfter)
			}
		})
	}

	t.Run("empty list is an empty array", func(t *testing.T) {
		t.Parallel()
		r := getPath(t, e, "/v1/submissions?state=failed")
		if r.Status != http.StatusOK {
			t.Fatalf("status %d; want 200", r.Status)
		}
		if !jsonEqual(r.Body, []byte(`{"submissions": [], "next_after": null}`)) {
			t.Errorf("body %s; want {\"submissions\": [], \"next_after\": null}", r.Body)
		}
	})
	t.Run("entries are full statuses", func(t *testing.T) {
		t.Parallel()
		r := getPath(t, e, "/v1/submissions?key=mode&value=preview")
		var page struct {
			Submissions []map[string]json.RawMessage `json:"submissions"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil || len(page.Submissions) != 1 {
			t.Fatalf("body %s; want one submission", r.Body)
		}
		if want := sortedKeys(statusOf(t, e, intID)); !slices.Equal(sortedKeys(page.Submissions[0]), want) {
			t.Errorf("list entry fields %q; want those of GET /v1/submissions/{id}: %q", sortedKeys(page.Submissions[0]), want)
		}
		expectField(t, page.Submissions[0], "strategic_metadata", `{"company_id": 42, "mode": "preview"}`)
	})
}

func TestListBadParameters(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	cases := []struct {
		query, mention string
	}{
		{"key=company_id", "value"},
		{"value=42", "key"},
		{"key=&value=42", "key"},
		{"state=done", "state"},
		{"state=IN_PROGRESS", "state"},
		{"state=PAUSED", "state"},
		{"state=waiting", "state"},
		{"state=paused,scheduled", "state"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=x", "limit"},
		{"limit=-1", "limit"},
		{"limit=1.5", "limit"},
		{"after=x", "after"},
		{"after=0", "after"},
		{"after=-5", "after"},
		{"after=1.5", "after"},
		{"after=9223372036854775808", "after"},
		// No submission can hold a NUL in a key or a string value (they are refused on the
		// way in); looking one up is bad input too, not a server error.
		{"key=company_id&value=%22a%5Cu0000b%22", "value"},
		{"key=a%00b&value=1", "key"},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			expectError(t, getPath(t, e, "/v1/submissions?"+tc.query), http.StatusBadRequest, "bad_request", tc.mention)
		})
	}
	t.Run("limit=1000", func(t *testing.T) {
		t.Parallel()
		listSubmissions(t, e, "limit=1000")
	})
}

// expectResultLines checks a 200 NDJSON results answer of exactly these lines.
func expectResultLines(t *testing.T, r reply, lines ...string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d (%s); want 200", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("Content-Type %q; want application/x-ndjson", ct)
	}
	want := strings.Join(lines, "\n")
	if len(lines) > 0 {
		want += "\n"
	}
	if string(r.Body) != want {
		t.Errorf("body\n%s\nwant\n%s", r.Body, want)
	}
}

// TestListPhases: state=running, paused and scheduled split the in-progress submissions
// (in_progress still lists them all); a paused one is paused whatever its not_before, one
// whose not_before has passed runs; a finished one is in none; a resumed one runs again;
// the filter pages and combines with strategic metadata.
func TestListPhases(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	running := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": 1}}`, 1)
	due := mustSubmit(t, e, `{"chunks": ["a"], "not_before": "`+past+`", "strategic_metadata": {"company_id": 1}}`, 1)
	scheduled := mustSubmit(t, e, `{"chunks": ["a"], "not_before": "1h", "strategic_metadata": {"company_id": 1}}`, 1)
	scheduled2 := mustSubmit(t, e, `{"chunks": ["a"], "not_before": "2h", "strategic_metadata": {"company_id": 2}}`, 1)
	paused := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": 1}}`, 1)
	pausedLater := mustSubmit(t, e, `{"chunks": ["a"], "not_before": "1h", "strategic_metadata": {"company_id": 2}}`, 1)
	resumed := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": 2}}`, 1)
	cancelled := mustSubmit(t, e, `{"chunks": ["a"], "strategic_metadata": {"company_id": 1}}`, 1)
	done := mustSubmit(t, e, `{"chunks": [], "strategic_metadata": {"company_id": 1}}`, 0)
	for _, id := range []string{paused, pausedLater, resumed, cancelled} {
		if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/pause", "", nil); r.Status != http.StatusOK {
			t.Fatalf("pause %s: status %d (%s); want 200", id, r.Status, r.Body)
		}
	}
	for path, id := range map[string]string{"resume": resumed, "cancel": cancelled} {
		if r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions/"+id+"/"+path, "", nil); r.Status != http.StatusOK {
			t.Fatalf("%s %s: status %d (%s); want 200", path, id, r.Status, r.Body)
		}
	}

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"state=in_progress", []string{resumed, pausedLater, paused, scheduled2, scheduled, due, running}},
		{"state=running", []string{resumed, due, running}},
		{"state=paused", []string{pausedLater, paused}},
		{"state=scheduled", []string{scheduled2, scheduled}},
		{"state=scheduled&key=company_id&value=1", []string{scheduled}},
		{"state=paused&key=company_id&value=2", []string{pausedLater}},
		{"state=running&key=company_id&value=1", []string{due, running}},
		{"state=completed", []string{done}},
		{"state=cancelled", []string{cancelled}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			if p := listSubmissions(t, e, tc.query); !slices.Equal(p.IDs, tc.want) || p.NextAfter != nil {
				t.Errorf("ids %q, next_after %v; want %q, null", p.IDs, p.NextAfter, tc.want)
			}
		})
	}
	t.Run("pages", func(t *testing.T) {
		t.Parallel()
		p := listSubmissions(t, e, "state=running&limit=2")
		if !slices.Equal(p.IDs, []string{resumed, due}) || p.NextAfter == nil || *p.NextAfter != due {
			t.Fatalf("first page of the running ones: %q, next_after %v; want [%s %s], %s", p.IDs, p.NextAfter, resumed, due, due)
		}
		if p := listSubmissions(t, e, "state=running&limit=2&after="+due); !slices.Equal(p.IDs, []string{running}) || p.NextAfter != nil {
			t.Errorf("second page of the running ones: %q, next_after %v; want [%s], null", p.IDs, p.NextAfter, running)
		}
	})
	t.Run("each row says its phase", func(t *testing.T) {
		t.Parallel()
		r := getPath(t, e, "/v1/submissions?state=paused")
		var page wire.StatusList
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, s := range page.Submissions {
			if s.State != wire.StateInProgress || !s.Paused || s.Phase(time.Now()) != wire.ListPaused {
				t.Errorf("%s in the paused list: state %s, paused %v, phase %q; want in_progress, true, paused", s.ID, s.State, s.Paused, s.Phase(time.Now()))
			}
		}
	})
}
