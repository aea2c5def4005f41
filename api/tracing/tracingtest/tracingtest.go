// Package tracingtest is an in-process OTLP/HTTP receiver for tests: instances export their
// spans to it (OTEL_EXPORTER_OTLP_ENDPOINT set to its URL), and the test reads them, in Go
// (Spans), or as JSON from GET /spans for the clients' tests in other languages.
package tracingtest

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps every span posted to /v1/traces as protobuf (what otlptracehttp sends).
// It is safe for concurrent use.
type Receiver struct {
	// URL is where it listens: the OTLP endpoint to give the instances.
	URL string

	mu    sync.Mutex
	spans []*tracepb.Span
}

// Start starts a Receiver, stopped at the end of the test.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Span is a span as GET /spans lists it: ids in lower-case hex, parent_span_id "" for a
// root.
type Span struct {
	Name         string `json:"name"`
	TraceID      string `json:"trace_id"`
	SpanID       string `json:"span_id"`
	ParentSpanID string `json:"parent_span_id"`
	Kind         string `json:"kind"` // SPAN_KIND_SERVER, say
}

// ServeHTTP takes POST /v1/traces (an OTLP export, protobuf) and answers GET /spans with
// the spans received so far, as a JSON list of Span; GET /spans?trace_id=<hex> lists those
// of one trace.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.URL.Path == "/v1/traces" && req.Method == http.MethodPost:
		r.export(w, req)
	case req.URL.Path == "/spans" && req.Method == http.MethodGet:
		trace := req.URL.Query().Get("trace_id")
		out := []Span{}
		for _, s := range r.Spans() {
			if id := hex.EncodeToString(s.TraceId); trace == "" || id == trace {
				out = append(out, Span{
					Name:         s.Name,
					TraceID:      id,
					SpanID:       hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId),
					Kind:         s.Kind.String(),
				})
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	default:
		http.NotFound(w, req)
	}
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
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

// Env is the environment that makes an instance export its spans to r, each within a
// tenth of a second of its end (so that a test waits little for them).
func (r *Receiver) Env() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + r.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}
}

// Attr returns the string attribute key of s, or "".
func Attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}
