package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

// setup starts a server answering with handler and returns a Client for it.
func setup(t *testing.T, handler http.HandlerFunc) *client.Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return client.New(srv.URL+"/", client.WithHTTPClient(srv.Client()), client.WithUserAgent("test-agent"))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestSubmit(t *testing.T) {
	t.Parallel()
	var got wire.Submission
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/submissions" {
			t.Errorf("got %s %s; want POST /v1/submissions", r.Method, r.URL.Path)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("got Content-Type %q; want application/json", ct)
		}
		if ua := r.Header.Get("User-Agent"); ua != "test-agent" {
			t.Errorf("got User-Agent %q; want test-agent", ua)
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Errorf("decoding body: %v", err)
		}
		writeJSON(w, http.StatusCreated, wire.Created{ID: "123", ChunksTotal: 2})
	})
	retries := 3
	sub := wire.Submission{
		SubmissionHeader: wire.SubmissionHeader{
			Metadata:          "m",
			StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(42), "mode": wire.String("preview")},
			Priority:          5,
			MaxRetries:        &retries,
		},
		Chunks: []string{"a", "b"},
	}
	created, err := c.Submit(context.Background(), sub)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if created != (wire.Created{ID: "123", ChunksTotal: 2}) {
		t.Errorf("got %+v; want id 123 with 2 chunks", created)
	}
	if len(got.Chunks) != 2 || got.Metadata != "m" || got.Priority != 5 || got.MaxRetries == nil || *got.MaxRetries != 3 {
		t.Errorf("server got %+v; want the submission sent", got)
	}
	if v := got.StrategicMetadata["company_id"]; v.IsString() || v.Int64() != 42 {
		t.Errorf("server got company_id %v; want 42", v)
	}
	if v := got.StrategicMetadata["mode"]; !v.IsString() || v.Str() != "preview" {
		t.Errorf("server got mode %v; want \"preview\"", v)
	}
}

func TestSubmitNDJSONStreams(t *testing.T) {
	t.Parallel()
	headerSeen := make(chan wire.SubmissionHeader, 1)
	var chunks []string
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Errorf("got Content-Type %q; want application/x-ndjson", ct)
		}
		br := bufio.NewReader(r.Body)
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Errorf("reading header line: %v", err)
			return
		}
		var h wire.SubmissionHeader
		if err := json.Unmarshal(line, &h); err != nil {
			t.Errorf("decoding header line %q: %v", line, err)
		}
		headerSeen <- h
		dec := json.NewDecoder(br)
		for {
			var s string
			if err := dec.Decode(&s); err == io.EOF {
				break
			} else if err != nil {
				t.Errorf("decoding chunk: %v", err)
				return
			}
			chunks = append(chunks, s)
		}
		writeJSON(w, http.StatusCreated, wire.Created{ID: "7", ChunksTotal: int64(len(chunks))})
	})

	// The chunks come from a pipe that is written only once the server has read the
	// header: if the client buffered the body, the server would never see the header.
	pr, pw := io.Pipe()
	type answer struct {
		created wire.Created
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		created, err := c.SubmitNDJSON(context.Background(), wire.SubmissionHeader{Metadata: "hdr"}, pr)
		done <- answer{created, err}
	}()
	select {
	case h := <-headerSeen:
		if h.Metadata != "hdr" {
			t.Errorf("got header metadata %q; want hdr", h.Metadata)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not receive the header line before the chunks were written: the body is not streamed")
	}
	if _, err := io.Copy(pw, client.LinesToNDJSON(strings.NewReader("one\ntwo \"2\"\n"))); err != nil {
		t.Fatalf("writing chunks: %v", err)
	}
	pw.Close()
	a := <-done
	if a.err != nil {
		t.Fatalf("SubmitNDJSON: %v", a.err)
	}
	if a.created.ID != "7" || a.created.ChunksTotal != 2 {
		t.Errorf("got %+v; want id 7 with 2 chunks", a.created)
	}
	if want := []string{"one", `two "2"`}; strings.Join(chunks, "|") != strings.Join(want, "|") {
		t.Errorf("server got chunks %q; want %q", chunks, want)
	}
}

func TestSubmitNDJSONReaderError(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusCreated, wire.Created{ID: "1"})
	})
	boom := errors.New("boom")
	_, err := c.SubmitNDJSON(context.Background(), wire.SubmissionHeader{}, iotest.ErrReader(boom))
	if !errors.Is(err, boom) {
		t.Errorf("got error %v; want the reader's error", err)
	}
}

func TestLinesToNDJSON(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3<<20)
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"one line without newline", "a", []string{"a"}},
		{"trailing newline", "a\nb\n", []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"lone cr kept inside", "a\rb\n", []string{"a\rb"}},
		{"empty lines", "\n\na\n\n", []string{"", "", "a", ""}},
		{"escapes", "q\"b\\t\t\x01<&>\n", []string{"q\"b\\t\t\x01<&>"}},
		{"unicode", "héllo \u2028 😀\n", []string{"héllo \u2028 😀"}},
		{"long line", long + "\nend", []string{long, "end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := io.ReadAll(iotest.HalfReader(client.LinesToNDJSON(iotest.HalfReader(strings.NewReader(tt.in)))))
			if err != nil {
				t.Fatalf("reading: %v", err)
			}
			var got []string
			for _, line := range strings.SplitAfter(string(out), "\n") {
				if line == "" {
					continue
				}
				if !strings.HasSuffix(line, "\n") {
					t.Fatalf("line %.40q does not end with a newline", line)
				}
				var s string
				if err := json.Unmarshal([]byte(line), &s); err != nil {
					t.Fatalf("line %.40q is not a JSON string: %v", line, err)
				}
				got = append(got, s)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d chunks; want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("chunk %d: got %.40q; want %.40q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestLinesToNDJSONInvalidUTF8(t *testing.T) {
	t.Parallel()
	_, err := io.ReadAll(client.LinesToNDJSON(strings.NewReader("ok\nbad \xff\n")))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("got error %v; want one naming line 2", err)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		wait     time.Duration
		wantWait string
	}{
		{"no wait", 0, ""},
		{"wait", 30 * time.Second, "30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/submissions/42" {
					t.Errorf("got path %s; want /v1/submissions/42", r.URL.Path)
				}
				if _, ok := r.URL.Query()["wait"]; ok != (tt.wantWait != "") || r.URL.Query().Get("wait") != tt.wantWait {
					t.Errorf("got query %q; want wait=%q", r.URL.RawQuery, tt.wantWait)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"42","state":"failed","chunks_total":3,"chunks_done":1,"chunks_failed":2,
					"priority":0,"metadata":"","strategic_metadata":{"k":1},"created_at":"2026-01-02T03:04:05Z",
					"finished_at":"2026-01-02T03:05:05Z","failure":{"chunk_index":1,"error":"boom"}}`)
			})
			s, err := c.Status(context.Background(), "42", tt.wait)
			if err != nil {
				t.Fatalf("Status: %v", err)
			}
			if s.State != wire.StateFailed || !s.Finished() || s.ChunksDone != 1 || s.Failure == nil || s.Failure.Error != "boom" || s.FinishedAt == nil {
				t.Errorf("got %+v; want the failed submission 42", s)
			}
		})
	}
}

func TestEmptyID(t *testing.T) {
	t.Parallel()
	c := client.New("http://127.0.0.1:1")
	if _, err := c.Status(context.Background(), "", 0); err == nil {
		t.Error("Status with an empty id: got no error")
	}
}

func TestResults(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/submissions/9/results" {
			t.Errorf("got path %s; want /v1/submissions/9/results", r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = io.WriteString(w, "{\"chunk_index\":0,\"output\":\"a\"}\n{\"chunk_index\":1,\"output\":\"b\\nc\"}\n{\"chunk_index\":2,\"output\":\"\"}\n")
	})
	var got []wire.Result
	err := c.Results(context.Background(), "9", func(r wire.Result) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Results: %v", err)
	}
	if len(got) != 3 || got[1].Output == nil || *got[1].Output != "b\nc" {
		t.Errorf("got %+v; want 3 results, the second \"b\\nc\"", got)
	}

	stop := errors.New("stop")
	n := 0
	err = c.Results(context.Background(), "9", func(wire.Result) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("got error %v after %d calls; want fn's error after 1 call", err, n)
	}
}

func TestResultsTruncated(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "{\"chunk_index\":0,\"output\":\"a\"}\n{\"chunk_in")
	})
	err := c.Results(context.Background(), "9", func(wire.Result) error { return nil })
	if err == nil {
		t.Error("got no error for a truncated stream")
	}
}

func TestCancelAndList(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/submissions/5/cancel":
			writeJSON(w, http.StatusOK, wire.Status{ID: "5", State: wire.StateCancelled})
		case r.Method == http.MethodGet && r.URL.Path == "/v1/submissions":
			if want := "after=10&key=company_id&limit=2&state=completed&value=42"; r.URL.RawQuery != want {
				t.Errorf("got query %q; want %q", r.URL.RawQuery, want)
			}
			next := "4"
			writeJSON(w, http.StatusOK, wire.StatusList{Submissions: []wire.Status{{ID: "6"}, {ID: "5"}}, NextAfter: &next})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	s, err := c.Cancel(context.Background(), "5")
	if err != nil || s.State != wire.StateCancelled {
		t.Errorf("Cancel: got %+v, %v; want a cancelled status", s, err)
	}
	l, err := c.List(context.Background(), client.ListOptions{State: wire.StateCompleted, Key: "company_id", Value: "42", Limit: 2, After: "10"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(l.Submissions) != 2 || l.NextAfter == nil || *l.NextAfter != "4" {
		t.Errorf("got %+v; want 2 submissions and next_after 4", l)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		body        string
		want        client.Error
		wantMessage string
	}{
		{
			name:        "opsq error",
			status:      400,
			body:        `{"error":{"code":"bad_request","message":"chunks[3]: must be a string"}}`,
			want:        client.Error{StatusCode: 400, Code: "bad_request", Message: "chunks[3]: must be a string"},
			wantMessage: "opsq: 400 bad_request: chunks[3]: must be a string",
		},
		{
			name:        "proxy page",
			status:      502,
			body:        "<html>Bad Gateway</html>\n",
			want:        client.Error{StatusCode: 502, Code: "http_502", Message: "<html>Bad Gateway</html>"},
			wantMessage: "opsq: 502 http_502: <html>Bad Gateway</html>",
		},
		{
			name:        "empty body",
			status:      503,
			want:        client.Error{StatusCode: 503, Code: "http_503", Message: "Service Unavailable"},
			wantMessage: "opsq: 503 http_503: Service Unavailable",
		},
		{
			name:        "json of another shape",
			status:      404,
			body:        `{"message":"Not Found"}`,
			want:        client.Error{StatusCode: 404, Code: "http_404", Message: `{"message":"Not Found"}`},
			wantMessage: `opsq: 404 http_404: {"message":"Not Found"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := c.Cancel(context.Background(), "1")
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("got error %v (%T); want a *client.Error", err, err)
			}
			if *e != tt.want {
				t.Errorf("got %+v; want %+v", *e, tt.want)
			}
			if e.Error() != tt.wantMessage {
				t.Errorf("got message %q; want %q", e.Error(), tt.wantMessage)
			}
		})
	}
}

func TestMaxResponseBytes(t *testing.T) {
	t.Parallel()
	answer := `{"chunks": []}` // 14 bytes, and no newline
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		limit   int64
		wantErr bool
	}{{int64(len(answer)), false}, {1 << 20, false}, {int64(len(answer)) - 1, true}, {3, true}} {
		c := client.New(srv.URL, client.WithHTTPClient(srv.Client()), client.WithMaxResponseBytes(tt.limit))
		_, err := c.Reserve(t.Context(), wire.ReserveRequest{Max: 1})
		if got := errors.Is(err, client.ErrResponseTooLarge); got != tt.wantErr {
			t.Errorf("a %d-byte answer read with a limit of %d: got %v; want ErrResponseTooLarge: %v", len(answer), tt.limit, err, tt.wantErr)
		}
	}
}

func TestResultsAnyState(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			t.Errorf("got query %q; want none without follow", r.URL.RawQuery)
		}
		_, _ = io.WriteString(w, "{\"chunk_index\":0,\"output\":\"a\"}\n{\"chunk_index\":1,\"state\":\"failed\",\"error\":\"boom\"}\n{\"chunk_index\":2,\"state\":\"skipped\"}\n")
	})
	var got []wire.Result
	if err := c.Results(t.Context(), "9", func(r wire.Result) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].Completed() || got[1].Completed() || got[1].State != "failed" || got[1].Error != "boom" || got[2].State != "skipped" {
		t.Errorf("got %+v; want an output, a failed chunk and a skipped one", got)
	}
}

// TestResultsFollow: the server ends the first followed stream before the submission has
// finished (its bound on a follow); ResultsFollow follows again and hands each line to fn
// once.
func TestResultsFollow(t *testing.T) {
	t.Parallel()
	streams := 0
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/submissions/9/results":
			if r.URL.Query().Get("follow") != "true" {
				t.Errorf("got query %q; want follow=true", r.URL.RawQuery)
			}
			streams++
			w.Header().Set("Content-Type", "application/x-ndjson")
			_, _ = io.WriteString(w, "{\"chunk_index\":0,\"output\":\"a\"}\n{\"chunk_index\":1,\"state\":\"failed\",\"error\":\"e\"}\n")
			if streams > 1 {
				_, _ = io.WriteString(w, "{\"chunk_index\":2,\"output\":\"c\"}\n")
			}
		case "/v1/submissions/9":
			state := wire.StateInProgress
			if streams > 1 {
				state = wire.StateFailed
			}
			writeJSON(w, http.StatusOK, wire.Status{ID: "9", State: state, ChunksTotal: 3})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	var got []int64
	err := c.ResultsFollow(t.Context(), "9", func(r wire.Result) error {
		got = append(got, r.ChunkIndex)
		return nil
	})
	if err != nil {
		t.Fatalf("ResultsFollow: %v", err)
	}
	if fmt.Sprint(got) != "[0 1 2]" || streams != 2 {
		t.Errorf("got lines %v over %d streams; want [0 1 2] over 2", got, streams)
	}
}

func TestResultsFollowStreamShortOfAFinishedSubmission(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/results") {
			_, _ = io.WriteString(w, "{\"chunk_index\":0,\"output\":\"a\"}\n")
			return
		}
		writeJSON(w, http.StatusOK, wire.Status{ID: "9", State: wire.StateCompleted, ChunksTotal: 2})
	})
	err := c.ResultsFollow(t.Context(), "9", func(wire.Result) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "after chunk 0 of 2") {
		t.Errorf("got %v; want an error saying the stream ended short", err)
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/submissions/5/failures" || r.URL.RawQuery != "after=7&limit=2" {
			t.Errorf("got %s %s; want GET /v1/submissions/5/failures?after=7&limit=2", r.Method, r.URL)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"failures": [{"chunk_index": 8, "state": "retrying", "retries": 2, "error": "boom",
			"errors": [{"error": "boom", "consumer": "c-1", "at": "2026-01-02T03:04:05Z"}, {"error": "bang", "consumer": "", "at": "2026-01-02T03:04:00Z"}]}],
			"next_after": 8}`)
	})
	after := int64(7)
	f, err := c.Failures(t.Context(), "5", client.FailuresOptions{Limit: 2, After: &after})
	if err != nil {
		t.Fatalf("Failures: %v", err)
	}
	if len(f.Failures) != 1 || f.NextAfter == nil || *f.NextAfter != 8 {
		t.Fatalf("got %+v; want one failed chunk and next_after 8", f)
	}
	fc := f.Failures[0]
	if fc.ChunkIndex != 8 || fc.State != "retrying" || fc.Retries != 2 || len(fc.Errors) != 2 || fc.Errors[0].Consumer != "c-1" || fc.Errors[1].At.IsZero() {
		t.Errorf("got %+v; want chunk 8 retrying with its 2 errors", fc)
	}
}

func TestRetryPauseResume(t *testing.T) {
	t.Parallel()
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			t.Errorf("got %s; want POST", r.Method)
		}
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/v1/submissions/5/retry":
			if want := `{"chunks":"unfinished","max_retries":3}`; string(body) != want {
				t.Errorf("retry body %s; want %s", body, want)
			}
			writeJSON(w, http.StatusOK, wire.Status{ID: "5", State: wire.StateInProgress})
		case "/v1/submissions/retry":
			if want := `{"state":"failed","key":"batch","value":7,"limit":20}`; string(body) != want {
				t.Errorf("bulk retry body %s; want %s", body, want)
			}
			writeJSON(w, http.StatusOK, wire.Retried{Retried: []string{"6", "5"}})
		case "/v1/submissions/5/pause":
			writeJSON(w, http.StatusOK, wire.Status{ID: "5", Paused: true})
		case "/v1/submissions/5/resume":
			writeJSON(w, http.StatusOK, wire.Status{ID: "5"})
		case "/v1/submissions/7/retry":
			if want := `{"chunk_indexes":[3,17]}`; string(body) != want {
				t.Errorf("retry of chunks, body %s; want %s", body, want)
			}
			writeJSON(w, http.StatusOK, wire.Status{ID: "7", State: wire.StateInProgress})
		case "/v1/submissions/6/retry":
			writeJSON(w, http.StatusConflict, wire.ErrorBody{Error: wire.ErrorDetail{Code: "nothing_to_retry", Message: "nothing failed"}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	})
	three := 3
	if s, err := c.Retry(t.Context(), "5", wire.RetryRequest{Chunks: wire.RetryUnfinished, MaxRetries: &three}); err != nil || s.State != wire.StateInProgress {
		t.Errorf("Retry: %+v, %v; want in progress", s, err)
	}
	if s, err := c.Retry(t.Context(), "7", wire.RetryRequest{ChunkIndexes: []int64{3, 17}}); err != nil || s.ID != "7" {
		t.Errorf("Retry of chunks 3 and 17: %+v, %v", s, err)
	}
	ids, err := c.RetryMany(t.Context(), wire.RetryManyRequest{State: wire.StateFailed, Key: "batch", Value: json.RawMessage(`7`), Limit: 20})
	if err != nil || fmt.Sprint(ids) != "[6 5]" {
		t.Errorf("RetryMany: %v, %v; want [6 5]", ids, err)
	}
	if s, err := c.Pause(t.Context(), "5"); err != nil || !s.Paused {
		t.Errorf("Pause: %+v, %v; want paused", s, err)
	}
	if s, err := c.Resume(t.Context(), "5"); err != nil || s.Paused {
		t.Errorf("Resume: %+v, %v; want not paused", s, err)
	}
	var e *client.Error
	if _, err := c.Retry(t.Context(), "6", wire.RetryRequest{}); !errors.As(err, &e) || e.StatusCode != 409 || e.Code != "nothing_to_retry" {
		t.Errorf("Retry with nothing to retry: %v; want a 409 nothing_to_retry", err)
	}
	if _, err := c.Pause(t.Context(), ""); err == nil {
		t.Error("Pause with an empty id: got no error")
	}
}

func TestSubmitTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	got := make(chan string, 4)
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Get(wire.HeaderTraceparent)
		writeJSON(w, http.StatusCreated, wire.Created{ID: "1", ChunksTotal: 1})
	})
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Submit with": func() error {
			_, err := c.Submit(ctx, wire.Submission{Chunks: []string{"a"}}, client.WithTraceparent(tp))
			return err
		},
		"SubmitNDJSON with": func() error {
			_, err := c.SubmitNDJSON(ctx, wire.SubmissionHeader{}, strings.NewReader("\"a\"\n"), client.WithTraceparent(tp))
			return err
		},
	} {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h := <-got; h != tp {
			t.Errorf("%s: the server got traceparent %q; want %q", name, h, tp)
		}
	}
	if _, err := c.Submit(ctx, wire.Submission{Chunks: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h != "" {
		t.Errorf("Submit without: the server got traceparent %q; want none", h)
	}
}

// TestConsumerTraceparent: a consumer's complete, fail and extend made with a context of
// ContextWithTraceparent send its traceparent, so that the instance's spans join the
// consumer's trace; made without, they send none.
func TestConsumerTraceparent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
	got := make(chan string, 1)
	c := setup(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Get(wire.HeaderTraceparent)
		writeJSON(w, http.StatusOK, wire.TokenResults{Results: []wire.TokenResult{{Token: "t", Status: wire.StatusCompleted}}})
	})
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Complete", func(ctx context.Context) error {
			_, err := c.Complete(ctx, wire.Completion{Token: "t"})
			return err
		}},
		{"Fail", func(ctx context.Context) error {
			_, err := c.Fail(ctx, wire.ChunkFailure{Token: "t", Error: "e"})
			return err
		}},
		{"Extend", func(ctx context.Context) error {
			_, err := c.Extend(ctx, "1m", "t")
			return err
		}},
	}
	for _, tc := range calls {
		for _, want := range []string{tp, ""} {
			if err := tc.call(client.ContextWithTraceparent(t.Context(), want)); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if h := <-got; h != want {
				t.Errorf("%s with traceparent %q: the server got %q", tc.name, want, h)
			}
		}
	}
}
