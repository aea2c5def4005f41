package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"opsq/api/tracing"
	"opsq/api/tracing/tracingtest"
	"opsq/api/wire"
	"opsq/client"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

// tracedServer starts an instance that exports its spans to an in-process OTLP receiver,
// and returns it, its tracer provider (to flush) and the receiver. Not for parallel tests:
// it sets the environment.
func tracedServer(t *testing.T) (*httptest.Server, *tracing.Provider, *tracingtest.Receiver) {
	t.Helper()
	recv := tracingtest.Start(t)
	t.Setenv(tracing.EnvEndpoint, recv.URL)

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

	return srv, spans, recv
}

// TestTraceSubmitToReserve: with OTEL_EXPORTER_OTLP_ENDPOINT set, a submission sent with a
// traceparent makes a request span in the producer's trace, under the producer's span,
// with the database spans beneath it; and every chunk reserved carries the traceparent.
// Not parallel: it sets the environment.
func TestTraceSubmitToReserve(t *testing.T) {
	srv, spans, recv := tracedServer(t)

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
		all := recv.Spans()
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
			if bytes.Equal(s.ParentSpanId, submitSpan.SpanId) && tracingtest.Attr(s, "db.system.name") == "postgresql" {
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

// TestTraceProducerToConsumer follows one trace from a producer's span through an instance
// to the consumers' spans and back: the producer submits with its span's traceparent; the
// instance's span of the submit is its child; each chunk reserved carries that
// traceparent, and a consumer's span started from it is its child too; the consumer
// completes one chunk and fails the other with its own span's traceparent, and the
// instance's spans of the complete and of the fail are children of those consumer spans.
// Not parallel: it sets the environment.
func TestTraceProducerToConsumer(t *testing.T) {
	srv, spans, recv := tracedServer(t)

	// The producer's and the consumers' spans: the OpenTelemetry SDK, recorded here.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("opsq-test")
	prop := propagation.TraceContext{}
	traceparentOf := func(ctx context.Context) string {
		carrier := propagation.MapCarrier{}
		prop.Inject(ctx, carrier)
		return carrier.Get(wire.HeaderTraceparent)
	}

	c := client.New(srv.URL)
	ctx, produce := tracer.Start(t.Context(), "produce", trace.WithSpanKind(trace.SpanKindProducer))
	producerTP := traceparentOf(ctx)
	if _, err := c.Submit(ctx, wire.Submission{
		SubmissionHeader: wire.SubmissionHeader{OnFailure: wire.OnFailureContinue}, // the fail leaves the other chunk to complete
		Chunks:           []string{"ok", "bad"},
	}, client.WithTraceparent(producerTP)); err != nil {
		t.Fatal(err)
	}
	produce.End()
	producer := produce.SpanContext()

	var chunks []wire.ReservedChunk
	for len(chunks) < 2 {
		got, err := c.Reserve(t.Context(), wire.ReserveRequest{Max: 2, Wait: "5s"})
		if err != nil || len(got) == 0 {
			t.Fatalf("reserve: %d chunks, %v; want the submission's 2", len(got), err)
		}
		chunks = append(chunks, got...)
	}
	consumers := map[string]trace.SpanContext{} // a chunk's input -> its consumer's span
	for _, ch := range chunks {
		if ch.Traceparent != producerTP {
			t.Errorf("chunk %d carries traceparent %q; want the producer's %q", ch.ChunkIndex, ch.Traceparent, producerTP)
		}
		chunkCtx := prop.Extract(context.Background(), propagation.MapCarrier{wire.HeaderTraceparent: ch.Traceparent})
		cctx, consume := tracer.Start(chunkCtx, "consume "+*ch.Input, trace.WithSpanKind(trace.SpanKindConsumer))
		cctx = client.ContextWithTraceparent(cctx, traceparentOf(cctx))
		var res []wire.TokenResult
		var err error
		if *ch.Input == "ok" {
			res, err = c.Complete(cctx, wire.Completion{Token: ch.Token, Output: "done"})
		} else {
			res, err = c.Fail(cctx, wire.ChunkFailure{Token: ch.Token, Error: "bad input", Retry: new(false)})
		}
		if err != nil || len(res) != 1 || (res[0].Status != wire.StatusCompleted && res[0].Status != wire.StatusFailed) {
			t.Fatalf("reporting chunk %q: %+v, %v; want completed or failed", *ch.Input, res, err)
		}
		consume.End()
		consumers[*ch.Input] = consume.SpanContext()
	}

	// The consumers' spans are children of the chunk's context: the producer's span.
	ended := 0
	for _, s := range rec.Ended() {
		if s.SpanKind() != trace.SpanKindConsumer {
			continue
		}
		ended++
		if s.SpanContext().TraceID() != producer.TraceID() || s.Parent().SpanID() != producer.SpanID() {
			t.Errorf("the span %q is in trace %s under %s; want trace %s under the producer's span %s",
				s.Name(), s.SpanContext().TraceID(), s.Parent().SpanID(), producer.TraceID(), producer.SpanID())
		}
	}

	if ended != 2 {
		t.Errorf("%d consumer spans ended; want 2", ended)
	}

	// The instance's spans: the submit under the producer's span, the complete and the
	// fail under the consumer spans that sent them, all in the producer's trace.
	want := map[string]trace.SpanID{
		"POST /v1/submissions": producer.SpanID(),
		"POST /v1/complete":    consumers["ok"].SpanID(),
		"POST /v1/fail":        consumers["bad"].SpanID(),
	}
	traceID := producer.TraceID()
	pgtest.WaitFor(t, 10*time.Second, "the instance's spans of the submit, the complete and the fail in the producer's trace", func() string {
		if err := spans.ForceFlush(t.Context()); err != nil {
			return err.Error()
		}
		parents := map[string][]string{} // name -> the parents of its spans in the trace
		for _, s := range recv.Spans() {
			if bytes.Equal(s.TraceId, traceID[:]) && s.Kind == tracepb.Span_SPAN_KIND_SERVER {
				parents[s.Name] = append(parents[s.Name], hex.EncodeToString(s.ParentSpanId))
			}
		}
		for name, parent := range want {
			if got := parents[name]; len(got) != 1 || got[0] != parent.String() {
				return fmt.Sprintf("the spans %q in trace %s have parents %q; want one, under %s", name, traceID, got, parent)
			}
		}
		return ""
	})
}
