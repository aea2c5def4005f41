package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"opsq/api/tracing"
	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

// otlpReceiver is an in-process OTLP/HTTP receiver: it keeps every span posted to
// /v1/traces as protobuf.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	r.mu.Unlock()
	answer, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(answer)
}

func (r *otlpReceiver) all() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// TestTraceSubmitToReserve: with OTEL_EXPORTER_OTLP_ENDPOINT set, a submission sent with a
// traceparent makes a request span in the producer's trace, under the producer's span,
// with the database spans beneath it; and every chunk reserved carries the traceparent.
// Not parallel: it sets the environment.
func TestTraceSubmitToReserve(t *testing.T) {
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	t.Cleanup(otlp.Close)
	t.Setenv(tracing.EnvEndpoint, otlp.URL)

	spans, err := tracing.FromEnv(t.Context())
	if err != nil || spans == nil {
		t.Fatalf("tracing.FromEnv = %v, %v; want a provider", spans, err)
	}
	t.Cleanup(func() { // t.Context() is done by now
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := spans.Shutdown(ctx); err != nil {
			t.Errorf("shutting the tracer provider down: %v", err)
		}
	})
	pcfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	pcfg.ConnConfig.Tracer = spans.QueryTracer()
	pool, err := pgxpool.NewWithConfig(t.Context(), pcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	q := queuertest.Start(t, queuer.Config{Pool: pool})
	h := New(Config{Queuer: q, Tracing: spans})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	const (
		traceID   = "4bf92f3577b34da6a3ce929d0e0e4736"
		producer  = "00f067aa0ba902b7"
		jsonTP    = "00-" + traceID + "-" + producer + "-01"
		ndjsonTP  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		invalidTP = "00-" + traceID + "-" + producer + "-1"
	)
	submit := func(contentType, body, traceparent string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/submissions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		if traceparent != "" {
			req.Header.Set(wire.HeaderTraceparent, traceparent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var created wire.Created
		if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit: status %d, %v; want 201", resp.StatusCode, err)
		}
		return created.ID
	}
	want := map[string]string{ // submission id -> the traceparent its chunks carry
		submit("application/json", `{"chunks": ["a", "b"]}`, jsonTP):             jsonTP,
		submit(ndjsonType, "{}\n\"c\"\n\"d\"\n", ndjsonTP):                       ndjsonTP,
		submit("application/json", `{"chunks": ["e"]}`, ""):                      "",
		submit("application/json", `{"chunks": ["f"]}`, invalidTP):               "", // ignored
		submit("application/json", `{"chunks": ["g"]}`, strings.ToUpper(jsonTP)): "",
	}

	resp, err := http.Post(srv.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 100}`))
	if err != nil {
		t.Fatal(err)
	}
	var reserved wire.Reserved
	err = json.NewDecoder(resp.Body).Decode(&reserved)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(reserved.Chunks) != 7 {
		t.Fatalf("reserved %d chunks; want 7", len(reserved.Chunks))
	}
	for _, ch := range reserved.Chunks {
		if ch.Traceparent != want[ch.SubmissionID] {
			t.Errorf("chunk %d of %s carries traceparent %q; want %q", ch.ChunkIndex, ch.SubmissionID, ch.Traceparent, want[ch.SubmissionID])
		}
	}

	// The submit's span, in the producer's trace under the producer's span, and a database
	// span beneath it.
	wantTrace, _ := hex.DecodeString(traceID)
	wantParent, _ := hex.DecodeString(producer)
	var submitSpan *tracepb.Span
	pgtest.WaitFor(t, 10*time.Second, "the submit's span and a database span under it", func() string {
		if err := spans.ForceFlush(t.Context()); err != nil {
			return err.Error()
		}
		all := recv.all()
		for _, s := range all {
			if s.Name == "POST /v1/submissions" && bytes.Equal(s.TraceId, wantTrace) {
				submitSpan = s
			}
		}
		if submitSpan == nil {
			return "no span POST /v1/submissions in the trace " + traceID
		}
		if !bytes.Equal(submitSpan.ParentSpanId, wantParent) {
			return "the submit's span has parent " + hex.EncodeToString(submitSpan.ParentSpanId) + "; want " + producer
		}
		var db []string
		for _, s := range all {
			if bytes.Equal(s.ParentSpanId, submitSpan.SpanId) && spanAttr(s, "db.system.name") == "postgresql" {
				db = append(db, s.Name)
			}
		}
		if len(db) == 0 {
			return "no database span under the submit's span"
		}
		return ""
	})
	if submitSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the submit's span is of kind %v; want server", submitSpan.Kind)
	}
}
