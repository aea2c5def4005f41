package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/sql/pgtest"
)

// The lifecycle routes end to end, on the engine: failures, retry (one and many), pause,
// resume, results in any state and followed, retry_after, and the lifecycle fields stored.
// They need the submissions store's operations (queuer/internal/submissions: Failures, Retry,
// RetryMany, Pause, Resume, Results, FollowResults, and the Lifecycle written at submit).

// postJSON posts body to path and returns the answer.
func postJSON(t *testing.T, e *env, path, body string) reply {
	t.Helper()
	return httpCall(t, http.MethodPost, e.URL+path, "application/json", strings.NewReader(body))
}

// reserveAll reserves up to max chunks as consumer and returns them by chunk index.
func reserveAll(t *testing.T, e *env, max int, consumer string) map[int64]wire.ReservedChunk {
	t.Helper()
	r := postJSON(t, e, "/v1/reserve", fmt.Sprintf(`{"max": %d, "consumer": %q}`, max, consumer))
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("reserve: %d %s", r.Status, r.Body)
	}
	out := map[int64]wire.ReservedChunk{}
	for _, ch := range got.Chunks {
		out[ch.ChunkIndex] = ch
	}
	return out
}

// tokenStatus posts a complete or fail and returns the one token's status.
func tokenStatus(t *testing.T, e *env, path, body string) wire.TokenStatus {
	t.Helper()
	r := postJSON(t, e, path, body)
	var got wire.TokenResults
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil || len(got.Results) != 1 {
		t.Fatalf("POST %s: %d %s; want one result", path, r.Status, r.Body)
	}
	return got.Results[0].Status
}

func complete(t *testing.T, e *env, ch wire.ReservedChunk, output string) {
	t.Helper()
	if st := tokenStatus(t, e, "/v1/complete", fmt.Sprintf(`{"completions": [{"token": %q, "output": %q}]}`, ch.Token, output)); st != wire.StatusCompleted {
		t.Fatalf("complete chunk %d: %s; want completed", ch.ChunkIndex, st)
	}
}

func fail(t *testing.T, e *env, ch wire.ReservedChunk, msg string, retry bool) wire.TokenStatus {
	t.Helper()
	return tokenStatus(t, e, "/v1/fail", fmt.Sprintf(`{"failures": [{"token": %q, "error": %q, "retry": %t}]}`, ch.Token, msg, retry))
}

func TestSubmitLifecycleStored(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a"], "on_failure": {"fail_after": {"chunks": 2}},
		"retry_backoff": {"initial": "0s", "factor": 3, "max": "5m"}, "not_before": "1h"}`, 1)
	st := statusOf(t, e, id)
	expectField(t, st, "on_failure", `{"fail_after":{"chunks":2}}`)
	nb, err := time.Parse(time.RFC3339Nano, jsonString(t, st["not_before"]))
	if d := time.Until(nb); err != nil || d < 58*time.Minute || d > time.Hour {
		t.Errorf("not_before %s (%v); want about an hour from now", st["not_before"], err)
	}
	var maxFailed *int
	var initial, maxMS int64
	var factor float64
	if err := e.Pool.QueryRow(t.Context(), `SELECT max_failed, backoff_initial_ms, backoff_factor, backoff_max_ms
		FROM opsq.submission_lifecycle WHERE id = $1`, mustInt64(t, id)).Scan(&maxFailed, &initial, &factor, &maxMS); err != nil {
		t.Fatalf("the submission's lifecycle row: %v", err)
	}
	if maxFailed == nil || *maxFailed != 2 || initial != 0 || factor != 3 || maxMS != 300_000 {
		t.Errorf("stored max_failed %v, backoff %dms × %g up to %dms; want 2, 0ms × 3 up to 300000ms", maxFailed, initial, factor, maxMS)
	}
	// Not before an hour from now: nothing to reserve.
	if got := reserveAll(t, e, 1, "c"); len(got) != 0 {
		t.Errorf("reserved %d chunks of a submission whose not_before is an hour away", len(got))
	}
	// continue is echoed too.
	other := mustSubmit(t, e, `{"chunks": ["a"], "on_failure": "continue"}`, 1)
	expectField(t, statusOf(t, e, other), "on_failure", `"continue"`)
}

func TestFailuresRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b", "c"], "max_retries": 1, "on_failure": "continue"}`, 3)
	chunks := reserveAll(t, e, 3, "host-1/pid-7")
	if st := fail(t, e, chunks[0], "try again", true); st != wire.StatusRetrying {
		t.Fatalf("fail chunk 0 with retry: %s; want retrying", st)
	}
	if st := fail(t, e, chunks[2], "broken for good", false); st != wire.StatusFailed {
		t.Fatalf("fail chunk 2 without retry: %s; want failed", st)
	}
	r := getPath(t, e, "/v1/submissions/"+id+"/failures")
	var page wire.Failures
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &page) != nil {
		t.Fatalf("failures: %d %s", r.Status, r.Body)
	}
	if len(page.Failures) != 2 || page.NextAfter != nil {
		t.Fatalf("failures %s; want chunks 0 and 2, no next page", r.Body)
	}
	f0, f2 := page.Failures[0], page.Failures[1]
	if f0.ChunkIndex != 0 || f0.State != "retrying" || f0.Retries != 1 || f0.Error != "try again" ||
		len(f0.Errors) != 1 || f0.Errors[0].Consumer != "host-1/pid-7" || f0.Errors[0].At.IsZero() {
		t.Errorf("chunk 0: %+v; want retrying, 1 retry, its error by host-1/pid-7", f0)
	}
	if f2.ChunkIndex != 2 || f2.State != "failed" || f2.Error != "broken for good" {
		t.Errorf("chunk 2: %+v; want failed with its error", f2)
	}
	// Pages.
	r = getPath(t, e, "/v1/submissions/"+id+"/failures?limit=1")
	page = wire.Failures{}
	if json.Unmarshal(r.Body, &page) != nil || len(page.Failures) != 1 || page.NextAfter == nil || *page.NextAfter != 0 {
		t.Fatalf("failures limit=1: %s; want chunk 0 and next_after 0", r.Body)
	}
	r = getPath(t, e, "/v1/submissions/"+id+"/failures?limit=1&after=0")
	page = wire.Failures{}
	if json.Unmarshal(r.Body, &page) != nil || len(page.Failures) != 1 || page.Failures[0].ChunkIndex != 2 || page.NextAfter != nil {
		t.Fatalf("failures after=0: %s; want chunk 2 and no next page", r.Body)
	}
	// A submission with no failure: [], not null.
	clean := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	if r := getPath(t, e, "/v1/submissions/"+clean+"/failures"); r.Status != http.StatusOK || string(r.Body) != "{\"failures\":[],\"next_after\":null}\n" {
		t.Errorf("failures of a clean submission: %d %s; want an empty page", r.Status, r.Body)
	}
	expectError(t, getPath(t, e, "/v1/submissions/12345/failures"), http.StatusNotFound, "not_found")
}

func TestRetryRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b"], "max_retries": 0}`, 2)
	chunks := reserveAll(t, e, 2, "c")
	complete(t, e, chunks[1], "B")
	fail(t, e, chunks[0], "boom", false)
	st := statusOf(t, e, id)
	expectField(t, st, "state", `"failed"`)

	r := postJSON(t, e, "/v1/submissions/"+id+"/retry", `{"max_retries": 2}`)
	if r.Status != http.StatusOK {
		t.Fatalf("retry: %d %s; want 200", r.Status, r.Body)
	}
	st = decodeObject(t, r.Body)
	expectField(t, st, "state", `"in_progress"`)
	expectField(t, st, "finished_at", "null")
	expectField(t, st, "chunks_done", "1")
	if _, ok := st["failure"]; ok {
		t.Errorf("status after retry %s; want no failure", r.Body)
	}
	// The completed output stays; the retried chunk is pending.
	expectResultLines(t, getPath(t, e, "/v1/submissions/"+id+"/results"),
		`{"chunk_index":0,"state":"pending"}`, `{"chunk_index":1,"output":"B"}`)
	// Nothing failed now.
	expectError(t, postJSON(t, e, "/v1/submissions/"+id+"/retry", ``), http.StatusConflict, "nothing_to_retry")
	expectError(t, postJSON(t, e, "/v1/submissions/12345/retry", `{}`), http.StatusNotFound, "not_found")

	// A cancelled submission: nothing failed, its chunks skipped.
	cancelled := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	if r := postJSON(t, e, "/v1/submissions/"+cancelled+"/cancel", ``); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	expectError(t, postJSON(t, e, "/v1/submissions/"+cancelled+"/retry", `{"chunks": "failed"}`), http.StatusConflict, "nothing_to_retry")
	if r := postJSON(t, e, "/v1/submissions/"+cancelled+"/retry", `{"chunks": "unfinished"}`); r.Status != http.StatusOK {
		t.Errorf("retry unfinished of a cancelled submission: %d %s; want 200", r.Status, r.Body)
	}
}

func TestRetryManyRoute(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	failed := func(batch int) string {
		id := mustSubmit(t, e, fmt.Sprintf(`{"chunks": ["a"], "max_retries": 0, "strategic_metadata": {"batch": %d}}`, batch), 1)
		for _, ch := range reserveAll(t, e, 10, "c") {
			fail(t, e, ch, "boom", false)
		}
		return id
	}
	older, newer, other := failed(7), failed(7), failed(8)
	r := postJSON(t, e, "/v1/submissions/retry", `{"key": "batch", "value": 7}`)
	var got wire.Retried
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("bulk retry: %d %s", r.Status, r.Body)
	}
	if !slices.Equal(got.Retried, []string{newer, older}) {
		t.Errorf("retried %q; want %q, newest first", got.Retried, []string{newer, older})
	}
	expectField(t, statusOf(t, e, other), "state", `"failed"`)
	// Nothing left to retry with batch 7: an empty list, not null.
	if r := postJSON(t, e, "/v1/submissions/retry", `{"key": "batch", "value": 7, "limit": 5}`); r.Status != http.StatusOK || string(r.Body) != "{\"retried\":[]}\n" {
		t.Errorf("bulk retry of nothing: %d %s; want {\"retried\":[]}", r.Status, r.Body)
	}
}

func TestPauseResumeRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	for range 2 { // idempotent
		r := postJSON(t, e, "/v1/submissions/"+id+"/pause", ``)
		if r.Status != http.StatusOK {
			t.Fatalf("pause: %d %s; want 200", r.Status, r.Body)
		}
		expectField(t, decodeObject(t, r.Body), "paused", "true")
	}
	if got := reserveAll(t, e, 1, "c"); len(got) != 0 {
		t.Fatalf("reserved %d chunks of a paused submission; want none", len(got))
	}
	for range 2 {
		r := postJSON(t, e, "/v1/submissions/"+id+"/resume", ``)
		if r.Status != http.StatusOK {
			t.Fatalf("resume: %d %s; want 200", r.Status, r.Body)
		}
		expectField(t, decodeObject(t, r.Body), "paused", "false")
	}
	if got := reserveAll(t, e, 1, "c"); len(got) != 1 {
		t.Fatalf("reserved %d chunks after resume; want 1", len(got))
	}
	if r := postJSON(t, e, "/v1/submissions/"+id+"/cancel", ``); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	expectError(t, postJSON(t, e, "/v1/submissions/"+id+"/pause", ``), http.StatusConflict, "already_finished")
	expectError(t, postJSON(t, e, "/v1/submissions/"+id+"/resume", ``), http.StatusConflict, "already_finished")
	expectError(t, postJSON(t, e, "/v1/submissions/12345/pause", ``), http.StatusNotFound, "not_found")
}

func TestFailRetryAfterHoldsTheChunk(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	mustSubmit(t, e, `{"chunks": ["a"], "max_retries": 3, "retry_backoff": {"initial": "0s"}}`, 1)
	ch := reserveAll(t, e, 1, "c")[0]
	st := tokenStatus(t, e, "/v1/fail", fmt.Sprintf(`{"failures": [{"token": %q, "error": "429", "retry_after": "1h"}]}`, ch.Token))
	if st != wire.StatusRetrying {
		t.Fatalf("fail with retry_after: %s; want retrying", st)
	}
	if got := reserveAll(t, e, 1, "c"); len(got) != 0 {
		t.Errorf("reserved the chunk again at once; want it held for its retry_after of 1h")
	}
}

// readLines reads NDJSON lines from a followed results stream until it ends.
func followLines(t *testing.T, e *env, id string) (<-chan string, <-chan int) {
	t.Helper()
	lines, status := make(chan string, 100), make(chan int, 1)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.URL+"/v1/submissions/"+id+"/results?follow=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(lines)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		defer resp.Body.Close()
		status <- resp.StatusCode
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, status
}

func TestResultsFollow(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b", "c"], "max_retries": 0, "on_failure": "continue"}`, 3)
	lines, status := followLines(t, e, id)
	select {
	case s := <-status:
		if s != http.StatusOK {
			t.Fatalf("follow: status %d; want 200 at once", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow: no status line within 10s; want it at once")
	}
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended early")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("no line within 10s")
		}
		return ""
	}
	chunks := reserveAll(t, e, 3, "c")
	complete(t, e, chunks[0], "A")
	if l := next(); l != `{"chunk_index":0,"output":"A"}` {
		t.Errorf("first line %s; want chunk 0's output", l)
	}
	complete(t, e, chunks[2], "C") // waits for chunk 1: in chunk order
	fail(t, e, chunks[1], "boom", false)
	if l := next(); l != `{"chunk_index":1,"state":"failed","error":"boom"}` {
		t.Errorf("second line %s; want chunk 1 failed", l)
	}
	if l := next(); l != `{"chunk_index":2,"output":"C"}` {
		t.Errorf("third line %s; want chunk 2's output", l)
	}
	select {
	case l, ok := <-lines:
		if ok {
			t.Errorf("line %s after the last chunk; want the stream to end", l)
		}
	case <-time.After(10 * time.Second):
		t.Error("the stream did not end within 10s of the submission finishing")
	}
	expectError(t, getPath(t, e, "/v1/submissions/12345/results?follow=true"), http.StatusNotFound, "not_found")
}

// TestResultsFollowBounded: a follow ends after MaxFollow, cleanly, and holds one of the
// results streams meanwhile.
func TestResultsFollowBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxFollow: time.Second, MaxResultStreams: 1, LimitWait: 100 * time.Millisecond})
	id := mustSubmit(t, e, `{"chunks": ["a"]}`, 1)
	start := time.Now()
	lines, status := followLines(t, e, id)
	if s := <-status; s != http.StatusOK {
		t.Fatalf("follow: status %d; want 200", s)
	}
	expectError(t, getPath(t, e, "/v1/submissions/"+id+"/results"), http.StatusServiceUnavailable, "busy", "OPSQ_MAX_RESULT_STREAMS")
	for l := range lines {
		t.Errorf("line %s; want none: nothing finished", l)
	}
	if took := time.Since(start); took < 900*time.Millisecond || took > 10*time.Second {
		t.Errorf("the follow ended after %s; want about MaxFollow (1s)", took)
	}
	pgtest.Eventually(t, 5*time.Second, "the results slot freed", func() bool {
		return getPath(t, e, "/v1/submissions/"+id+"/results").Status == http.StatusOK
	})
}

// TestRetryOverQuota (issue 31, finding 9): a retry, of one submission or in bulk, that
// would take the tenant past a quota answers what a submit over it answers: 429
// quota_exceeded with Retry-After, and the submission stays cancelled.
func TestRetryOverQuota(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := mustSubmit(t, e, `{"chunks": ["a", "b"]}`, 2)
	if r := postJSON(t, e, "/v1/submissions/"+id+"/cancel", `{}`); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	mustSubmit(t, e, `{"chunks": ["c"]}`, 1)
	if _, err := e.Pool.Exec(t.Context(), `INSERT INTO opsq.tenants (name, max_in_progress) VALUES ('default', 1)`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/submissions/" + id + "/retry", `{"chunks": "unfinished"}`},
		{"/v1/submissions/retry", `{"state": "cancelled", "chunks": "unfinished"}`},
	} {
		r := postJSON(t, e, c.path, c.body)
		expectError(t, r, http.StatusTooManyRequests, "quota_exceeded", "max_in_progress")
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("POST %s: quota_exceeded without Retry-After", c.path)
		}
	}
	if st := string(statusOf(t, e, id)["state"]); st != `"cancelled"` {
		t.Errorf("after the retries over the quota the submission is %s; want cancelled", st)
	}
	// Room for one more: a bulk retry of two retries the newest, refuses the other, and
	// says how many it retried.
	older := id
	if _, err := e.Pool.Exec(t.Context(), `UPDATE opsq.tenants SET max_in_progress = NULL WHERE name = 'default'`); err != nil {
		t.Fatal(err)
	}
	newer := mustSubmit(t, e, `{"chunks": ["d"]}`, 1)
	if r := postJSON(t, e, "/v1/submissions/"+newer+"/cancel", `{}`); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Body)
	}
	if _, err := e.Pool.Exec(t.Context(), `UPDATE opsq.tenants SET max_in_progress = 2 WHERE name = 'default'`); err != nil {
		t.Fatal(err)
	}
	r := postJSON(t, e, "/v1/submissions/retry", `{"state": "cancelled", "chunks": "unfinished"}`)
	expectError(t, r, http.StatusTooManyRequests, "quota_exceeded", "max_in_progress", "the 1 submissions before it were retried")
	if st := string(statusOf(t, e, newer)["state"]); st != `"in_progress"` {
		t.Errorf("the newer submission is %s after the bulk retry; want in_progress", st)
	}
	if st := string(statusOf(t, e, older)["state"]); st != `"cancelled"` {
		t.Errorf("the older submission is %s after the bulk retry; want cancelled", st)
	}
}
