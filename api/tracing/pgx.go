package tracing

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// QueryTracer returns the pgx tracer of the request pool (pgx.ConnConfig.Tracer): a
// client span per statement and per COPY, under the span of the request that runs it.
// A statement whose context carries no span (a background loop's) gets none, so that only
// requests make traces. Nil-safe: a nil Provider's tracer is nil, which pgx takes as none.
func (p *Provider) QueryTracer() pgx.QueryTracer {
	if p == nil {
		return nil
	}
	return &queryTracer{tracer: p.tracer}
}

// queryTracer is QueryTracer's; it also traces COPY (pgx.CopyFromTracer).
type queryTracer struct {
	tracer trace.Tracer
}

var (
	_ pgx.QueryTracer    = (*queryTracer)(nil)
	_ pgx.CopyFromTracer = (*queryTracer)(nil)
)

// queryTextMax bounds the statement text a span carries.
const queryTextMax = 2048

func (t *queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	op := operation(data.SQL)
	text := data.SQL
	if len(text) > queryTextMax {
		text = text[:queryTextMax]
	}
	ctx, _ = t.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", "postgresql"),
		attribute.String("db.operation.name", op),
		attribute.String("db.query.text", text),
	))
	return ctx
}

func (t *queryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	end(ctx, data.Err, data.CommandTag.RowsAffected())
}

func (t *queryTracer) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	ctx, _ = t.tracer.Start(ctx, "COPY", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", "postgresql"),
		attribute.String("db.operation.name", "COPY"),
		attribute.String("db.collection.name", data.TableName.Sanitize()),
	))
	return ctx
}

func (t *queryTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	end(ctx, data.Err, data.CommandTag.RowsAffected())
}

// end ends the span TraceQueryStart or TraceCopyFromStart began in ctx, if it began one.
func end(ctx context.Context, err error, rows int64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int64("db.response.returned_rows", rows))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// operation is the statement's first keyword (SELECT, INSERT, WITH …), past the comment
// lines every statement file of package sql starts with.
func operation(sql string) string {
	for line := range strings.Lines(sql) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--") {
			continue
		}
		if i := strings.IndexAny(line, " \t("); i > 0 {
			line = line[:i]
		}
		return strings.ToUpper(line)
	}
	return "query"
}
