package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/opsqtype"
	"opsq/sql/pgtest"
)

// bigComplete is a complete of one (unknown) token whose output is n bytes: a body of
// about n bytes that decodes into several copies of it.
func bigComplete(n int) string {
	return `{"completions": [{"token": "nope", "output": "` + strings.Repeat("o", n) + `"}]}`
}

// TestBudgetHolds: the bytes held for bodies stay within OPSQ_MAX_INFLIGHT_BYTES however
// many large requests come at once; those beyond it get 503 with Retry-After, and a small
// request still passes while large ones hold the budget.
func TestBudgetHolds(t *testing.T) {
	t.Parallel()
	const budget = 8 << 20
	e := setup(t, Config{MaxInflightBytes: budget, MaxBody: 2 << 20, LimitWait: 100 * time.Millisecond})

	// A large body that stops half-way holds what it sent, counted as decoded.
	body := bigComplete(1536 << 10)
	head := fmt.Sprintf("POST /v1/complete HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	stalled := rawRequest(t, e, head, body[:len(body)-100], 0)
	pgtest.WaitFor(t, 20*time.Second, "the stalled body to be counted in the budget", func() string {
		if n := e.H.InflightBytes(); n < int64(4*(len(body)-100)) {
			return fmt.Sprintf("%d bytes held", n)
		}
		return ""
	})

	var r reply
	pgtest.WaitFor(t, 20*time.Second, "a second large request to be refused", func() string {
		if r = postJSON(t, e, "/v1/complete", body); r.Status != http.StatusServiceUnavailable {
			return fmt.Sprintf("status %d", r.Status)
		}
		return ""
	})
	expectError(t, r, http.StatusServiceUnavailable, "busy", "OPSQ_MAX_INFLIGHT_BYTES")
	if got := r.Header.Get("Retry-After"); got == "" {
		t.Error("the 503 has no Retry-After")
	}
	if m := getPath(t, e, "/metrics"); !strings.Contains(string(m.Body), "\nopsq_inflight_refused_total ") || !strings.Contains(string(m.Body), "\nopsq_inflight_bytes ") {
		t.Errorf("/metrics lacks opsq_inflight_bytes or opsq_inflight_refused_total")
	} else if v := metricValue(t, string(m.Body), "opsq_inflight_refused_total"); v < 1 {
		t.Errorf("opsq_inflight_refused_total %g after a refusal; want at least 1", v)
	}
	if r := postJSON(t, e, "/v1/complete", `{"completions": [{"token": "nope", "output": "small"}]}`); r.Status != http.StatusOK {
		t.Errorf("a small complete while the budget is held: %d %s; want 200", r.Status, r.Body)
	}

	// Many at once: the budget holds, some are refused, the others are served.
	var peak atomic.Int64
	done := make(chan struct{})
	go func() {
		for {
			if n := e.H.InflightBytes(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	stalled.Close()
	pgtest.WaitFor(t, 20*time.Second, "the stalled request's bytes to be given back", func() string {
		if n := e.H.InflightBytes(); n != 0 {
			return fmt.Sprintf("%d bytes held", n)
		}
		return ""
	})
	var wg sync.WaitGroup
	var ok, busy, other atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch r := postJSON(t, e, "/v1/complete", body); r.Status {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusServiceUnavailable:
				busy.Add(1)
			default:
				other.Add(1)
				t.Errorf("a large complete: %d %s; want 200 or 503", r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	close(done)
	if p := peak.Load(); p > budget {
		t.Errorf("the requests held %d bytes at the most; want at most the budget %d", p, budget)
	}
	if ok.Load() == 0 {
		t.Error("no large complete was served; want those the budget has room for served")
	}
	t.Logf("8 large completes at once: %d served, %d refused; peak %d bytes of %d", ok.Load(), busy.Load(), peak.Load(), budget)
	pgtest.WaitFor(t, 20*time.Second, "every byte to be given back", func() string {
		if n := e.H.InflightBytes(); n != 0 {
			return fmt.Sprintf("%d bytes held", n)
		}
		return ""
	})
}

// TestBudgetJSONSubmission: a JSON submission is counted as it is decoded, and one the
// budget has no room for is refused with nothing stored; once room is back it goes in.
func TestBudgetJSONSubmission(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxInflightBytes: 4 << 20, MaxBody: 1 << 20, LimitWait: 100 * time.Millisecond})
	chunks := make([]string, 1000)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("%04d", i) + strings.Repeat("c", 996)
	}
	b, _ := json.Marshal(map[string]any{"chunks": chunks, "metadata": "big"})
	// A stalled one holds 4 times what it sent; the budget has no room for a second.
	head := fmt.Sprintf("POST /v1/submissions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b)+1)
	stalled := rawRequest(t, e, head, string(b[:len(b)-10]), 0)
	// Every byte it sent counted (4 × each), not most of them: a stalled request still
	// reading could find the second one holding the room it needs, wait LimitWait, be
	// refused itself, and free the budget for the second (seen once under heavy load).
	pgtest.WaitFor(t, 20*time.Second, "the stalled submission to be counted", func() string {
		if n := e.H.InflightBytes(); n < int64(4*(len(b)-10)) {
			return fmt.Sprintf("%d bytes held", n)
		}
		return ""
	})
	r := postSubmission(t, e, "application/json", string(b))
	expectError(t, r, http.StatusServiceUnavailable, "busy", "OPSQ_MAX_INFLIGHT_BYTES")
	expectNothingStored(t, e)
	stalled.Close()
	var id string
	pgtest.WaitFor(t, 20*time.Second, "the submission to go in once the budget has room", func() string {
		r := postSubmission(t, e, "application/json", string(b))
		if r.Status != http.StatusCreated {
			return fmt.Sprintf("status %d", r.Status)
		}
		id = expectCreated(t, r, http.StatusCreated, 1000)
		return ""
	})
	// Chunks decoded one by one keep their order and content.
	got := pgtest.Count(t, e.Pool, `SELECT count(*) FROM opsq.chunks
		WHERE submission_id = $1 AND convert_from(input, 'UTF8') = lpad(chunk_index::text, 4, '0') || repeat('c', 996)`, mustInt64(t, id))
	if got != 1000 {
		t.Errorf("%d chunks hold their content at their index; want 1000", got)
	}
}

// TestListPageCut: a page of submissions stops at MaxListPageBytes, whatever its limit,
// and its next_after leads through every submission once.
func TestListPageCut(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const n = 80 // 80 × 64 KiB of metadata: 5 MiB
	meta := strings.Repeat("m", MaxMetadataBytes)
	for range n {
		mustSubmit(t, e, `{"chunks": ["c"], "metadata": "`+meta+`"}`, 1)
	}
	seen := map[string]bool{}
	after, pages := "", 0
	for {
		path := "/v1/submissions?limit=1000"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		r := getPath(t, e, path)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		if len(r.Body) > MaxListPageBytes+64<<10 {
			t.Errorf("a page of %d bytes; want at most about %d", len(r.Body), MaxListPageBytes)
		}
		var page wire.StatusList
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, st := range page.Submissions {
			if seen[st.ID] {
				t.Errorf("submission %s on two pages", st.ID)
			}
			seen[st.ID] = true
		}
		if page.NextAfter == nil {
			break
		}
		after = *page.NextAfter
	}
	if len(seen) != n || pages < 2 {
		t.Errorf("%d submissions on %d pages; want %d on at least 2", len(seen), pages, n)
	}
}

// seedFailures records errors for the first n chunks of submission id: five each, of
// ErrorMax bytes of '<' (six bytes each as JSON writes them) by a consumer named with 256
// of them, but a short one for every third chunk.
func seedFailures(t *testing.T, e *env, id string, n int) {
	t.Helper()
	if _, err := e.Pool.Exec(t.Context(), `INSERT INTO opsq.chunk_errors (submission_id, chunk_index, attempt, error, consumer)
		SELECT $1, i, a, CASE WHEN i % 3 = 1 THEN 'short ' || i ELSE repeat('<', $2) END, repeat('<', 256)
		FROM generate_series(0, $3 - 1) i, generate_series(0, 4) a`, mustInt64(t, id), queuer.ErrorMax, n); err != nil {
		t.Fatal(err)
	}
}

// TestFailuresPageCut: a page of failures stops at MaxFailuresPageBytes as it is sent,
// however its errors are escaped and whatever its limit, and its next_after leads through
// every failed chunk once, in order, each whole (issue 31, finding 2).
func TestFailuresPageCut(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	const n = 60 // 40 chunks of about 300 KB of JSON: 12 MB
	id := mustSubmit(t, e, `{"chunks": [`+strings.TrimSuffix(strings.Repeat(`"c",`, n), ",")+`], "on_failure": "continue"}`, n)
	seedFailures(t, e, id, n)
	big := strings.Repeat("<", queuer.ErrorMax)
	next, pages := int64(0), 0
	after := ""
	for {
		path := "/v1/submissions/" + id + "/failures?limit=1000"
		if after != "" {
			path += "&after=" + after
		}
		r := getPath(t, e, path)
		if r.Status != http.StatusOK {
			t.Fatalf("GET %s: %d %.200s", path, r.Status, r.Body)
		}
		if len(r.Body) > MaxFailuresPageBytes {
			t.Errorf("a page of %d bytes; want at most %d", len(r.Body), MaxFailuresPageBytes)
		}
		var page wire.Failures
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Failures) == 0 {
			t.Fatalf("page %d is empty; want at least one chunk", pages)
		}
		for _, f := range page.Failures {
			want := big
			if f.ChunkIndex%3 == 1 {
				want = fmt.Sprintf("short %d", f.ChunkIndex)
			}
			if f.ChunkIndex != next || len(f.Errors) != 5 || f.Error != want || f.Errors[4].Error != want || len(f.Errors[0].Consumer) != 256 {
				t.Fatalf("page %d has chunk %d with %d errors (last %.20q); want chunk %d with 5 errors %.20q", pages, f.ChunkIndex, len(f.Errors), f.Error, next, want)
			}
			next++
		}
		if page.NextAfter == nil {
			break
		}
		if last := page.Failures[len(page.Failures)-1].ChunkIndex; *page.NextAfter != last {
			t.Fatalf("page %d ends at chunk %d with next_after %d; want next_after at its last chunk", pages, last, *page.NextAfter)
		}
		after = fmt.Sprint(*page.NextAfter)
	}
	if next != n || pages < 3 {
		t.Errorf("%d failed chunks on %d pages; want %d on at least 3", next, pages, n)
	}
}

// TestFailuresPageBudget: a failures page is counted in the memory budget while it is
// built: with the budget held by a stalled body, it is refused with 503 busy; once the
// budget has room, it is served.
func TestFailuresPageBudget(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{MaxInflightBytes: 4 << 20, MaxBody: 1 << 20, LimitWait: 100 * time.Millisecond})
	id := mustSubmit(t, e, `{"chunks": ["a", "b"], "on_failure": "continue"}`, 2)
	seedFailures(t, e, id, 2)
	chunks := make([]string, 1000)
	for i := range chunks {
		chunks[i] = strings.Repeat("c", 1000)
	}
	b, _ := json.Marshal(map[string]any{"chunks": chunks})
	head := fmt.Sprintf("POST /v1/submissions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(b)+1)
	stalled := rawRequest(t, e, head, string(b[:len(b)-10]), 0)
	pgtest.WaitFor(t, 20*time.Second, "the stalled submission to be counted", func() string {
		if n := e.H.InflightBytes(); n < int64(4*(len(b)-10)) {
			return fmt.Sprintf("%d bytes held", n)
		}
		return ""
	})
	expectError(t, getPath(t, e, "/v1/submissions/"+id+"/failures"), http.StatusServiceUnavailable, "busy", "OPSQ_MAX_INFLIGHT_BYTES")
	stalled.Close()
	pgtest.WaitFor(t, 20*time.Second, "the failures page once the budget has room", func() string {
		if r := getPath(t, e, "/v1/submissions/"+id+"/failures"); r.Status != http.StatusOK {
			return fmt.Sprintf("status %d", r.Status)
		}
		return ""
	})
}

// TestPrefixBound: a prefix over MaxPrefixBytes is a 400 naming prefix; one at the bound
// goes in.
func TestPrefixBound(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	long := `{"prefix": "s3://` + strings.Repeat("p", MaxPrefixBytes-4) + `", "chunk_count": 1}`
	expectError(t, postSubmission(t, e, "application/json", long), http.StatusBadRequest, "bad_request", "prefix", "1024")
	expectError(t, postSubmission(t, e, "application/x-ndjson", long+"\n"), http.StatusBadRequest, "bad_request", "prefix")
	expectNothingStored(t, e)
	mustSubmit(t, e, `{"prefix": "s3://`+strings.Repeat("p", MaxPrefixBytes-5)+`", "chunk_count": 1}`, 1)
}

// TestLoginFormBound: a dashboard login form over MaxLoginFormBytes is refused with 413
// before it is parsed; a normal one is not.
func TestLoginFormBound(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(form string) reply {
		t.Helper()
		resp, err := client.Post(e.URL+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	// The audit's 10 MB: the instance holds no more than the bound of it, and drops the
	// rest as it comes, so that the client gets the answer rather than a reset.
	before := e.H.InflightBytes()
	expectError(t, post("key="+strings.Repeat("k", 10<<20)), http.StatusRequestEntityTooLarge, "too_large", "login form")
	if after := e.H.InflightBytes(); after != before {
		t.Errorf("%d bytes held after the refused form; want %d", after, before)
	}
	if r := post("key=k&next=%2Fui%2F"); r.Status == http.StatusRequestEntityTooLarge {
		t.Errorf("a small login form: %d %s; want it served", r.Status, r.Body)
	}
}

// TestBodyRateFloor: a body that keeps sending, but less than the floor in a window, is
// cut with 408 and nothing of it is kept; one above the floor is not.
func TestBodyRateFloor(t *testing.T) {
	t.Parallel()
	const window = time.Second
	e := setup(t, Config{BodyIdleTimeout: window, BodyMinBytes: 16 << 10})
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	go func() { // a line of about 40 bytes every 100 ms: never idle, far under the floor
		defer pw.Close()
		fmt.Fprintln(pw, `{"metadata": "trickle"}`)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(window / 10):
			}
			if _, err := fmt.Fprintf(pw, "\"chunk %d of a trickling upload\"\n", i); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions", "application/x-ndjson", pr)
	close(stop)
	expectError(t, r, http.StatusRequestTimeout, "request_timeout", "floor", "OPSQ_BODY_IDLE_TIMEOUT")
	if took := time.Since(start); took < window {
		t.Errorf("cut after %s; want no sooner than the window %s", took, window)
	}
	expectNothingStored(t, e)

	// Above the floor, in pieces slower than the window in all: not cut.
	pr, pw = io.Pipe()
	go func() {
		defer pw.Close()
		fmt.Fprintln(pw, `{"metadata": "steady"}`)
		line := `"` + strings.Repeat("s", 20<<10) + `"` + "\n"
		for range 6 {
			time.Sleep(window / 3)
			if _, err := io.WriteString(pw, line); err != nil {
				return
			}
		}
	}()
	expectCreated(t, httpCall(t, http.MethodPost, e.URL+"/v1/submissions", "application/x-ndjson", pr), http.StatusCreated, 6)
}

// TestIngestTimeCap: a submission still sending at OPSQ_MAX_INGEST_TIME is cut with 408,
// and nothing of it is kept.
func TestIngestTimeCap(t *testing.T) {
	t.Parallel()
	const limit = 2 * time.Second
	e := setup(t, Config{MaxIngestTime: limit, BodyMinBytes: 1})
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	go func() {
		defer pw.Close()
		fmt.Fprintln(pw, `{"metadata": "endless"}`)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := fmt.Fprintf(pw, "\"chunk %d\"\n", i); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	r := httpCall(t, http.MethodPost, e.URL+"/v1/submissions", "application/x-ndjson", pr)
	close(stop)
	expectError(t, r, http.StatusRequestTimeout, "request_timeout", "OPSQ_MAX_INGEST_TIME")
	if took := time.Since(start); took < limit {
		t.Errorf("cut after %s; want no sooner than %s", took, limit)
	}
	expectNothingStored(t, e)
}

// TestOrphanChunksNotReserved: the committed slices of an object-storage submission still
// going in (no submission row yet) are never handed out.
func TestOrphanChunksNotReserved(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	shards := int(pgtest.Count(t, e.Pool, "SELECT value::bigint FROM opsq.settings WHERE key = 'shard_count'"))
	const id = int64(1) << 40
	for i := range 50 {
		if _, err := e.Pool.Exec(t.Context(), `INSERT INTO opsq.chunks (submission_id, chunk_index, shard, random_order) VALUES ($1, $2, $3, $4)`,
			id, i, opsqtype.ShardOf(id, i, shards), opsqtype.RandomOrder(id, i, shards)); err != nil {
			t.Fatal(err)
		}
	}
	mustSubmit(t, e, `{"chunks": ["real"]}`, 1)
	for _, strategy := range []string{`"random"`, `"oldest_first"`, `"newest_first"`} {
		r := postJSON(t, e, "/v1/reserve", `{"max": 100, "strategy": `+strategy+`}`)
		if r.Status != http.StatusOK {
			t.Fatalf("reserve %s: %d %s", strategy, r.Status, r.Body)
		}
		var got wire.Reserved
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatal(err)
		}
		for _, ch := range got.Chunks {
			if ch.SubmissionID == fmt.Sprint(id) {
				t.Errorf("reserve %s handed out chunk %d of a submission not yet inserted", strategy, ch.ChunkIndex)
			}
		}
	}
}

// TestReadSized: a body is read whole, into no more than its length, whatever the length
// announced and however it comes.
func TestReadSized(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, size int }{{0, 10}, {1, 1}, {100, 100}, {200 << 10, 200 << 10}, {70 << 10, 1 << 20}, {300, 100}} {
		body := strings.Repeat("b", c.n)
		got, err := readSized(iotest.OneByteReader(strings.NewReader(body)), c.size)
		if err != nil || string(got) != body {
			t.Errorf("%d bytes announced as %d: got %d bytes, %v; want them all", c.n, c.size, len(got), err)
		}
		if c.n <= c.size && cap(got) > c.size {
			t.Errorf("%d bytes announced as %d: a buffer of %d bytes; want at most %d", c.n, c.size, cap(got), c.size)
		}
	}
}

// TestBudgetOldestHolderWaits: when requests that hold bytes need more than is left, the
// younger ones are refused at once (their bytes go back) and the oldest waits for them, so
// that requests growing side by side do not all wait on each other and all fail. A request
// that holds nothing yet waits as before.
func TestBudgetOldestHolderWaits(t *testing.T) {
	t.Parallel()
	const u = budgetGrain           // holds grow by grains
	b := newBudget(10*u, time.Hour) // a wait no test outlives: whoever waits, waits for a release
	ctx := t.Context()
	older, younger := &hold{b: b}, &hold{b: b}
	if err := older.growTo(ctx, 4*u); err != nil {
		t.Fatal(err)
	}
	if err := younger.growTo(ctx, 3*u); err != nil {
		t.Fatal(err)
	}
	result := func(f func() error) <-chan error {
		ch := make(chan error, 1)
		go func() { ch <- f() }()
		return ch
	}
	select {
	case err := <-result(func() error { return younger.growTo(ctx, 7*u) }):
		if e, ok := err.(*Error); !ok || e.Code != "busy" {
			t.Fatalf("the younger hold growing past the budget: %v; want busy at once", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the younger hold growing past the budget waited; want it refused at once")
	}
	waits := func(what string, ch <-chan error) {
		t.Helper()
		select {
		case err := <-ch:
			t.Fatalf("%s got an answer, %v, while there is no room; want it waiting", what, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	olderGrows := result(func() error { return older.growTo(ctx, 8*u) })
	waits("the oldest hold", olderGrows)
	younger.free()
	if err := <-olderGrows; err != nil {
		t.Fatalf("the oldest hold, once the younger gave its bytes back: %v; want room", err)
	}
	fresh := result(func() error { return (&hold{b: b}).growTo(ctx, 3*u) })
	waits("a hold holding nothing", fresh)
	older.free()
	if err := <-fresh; err != nil {
		t.Fatalf("a hold holding nothing, once the oldest gave its bytes back: %v; want room", err)
	}
}
