// Package tracing exports OpenTelemetry spans for the requests an instance serves and the
// database calls beneath them (DESIGN.md §9), over OTLP, when OTEL_EXPORTER_OTLP_ENDPOINT
// is set. Unset, FromEnv returns nil and nothing is installed: no tracer provider, no
// middleware, no pgx tracer, so tracing costs nothing.
//
// The SDK reads the standard variables besides: OTEL_TRACES_SAMPLER and its _ARG (every
// request is sampled by default, parent-based), OTEL_BSP_* (the batch queue: 2048 spans by
// default; past it spans are dropped rather than slowing requests, which at tens of
// thousands of chunks a second drops most of them: sample, or raise the queue),
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
//
// It does not propagate the trace context to consumers: a submission's traceparent is
// stored and handed out by the engine (api/wire.HeaderTraceparent).
package tracing

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// EnvEndpoint is the variable that turns tracing on: the OTLP/HTTP endpoint spans go to
// (e.g. http://localhost:4318); the exporter reads the other OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, TLS) itself.
const EnvEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// ServiceName is the service.name of the spans, unless OTEL_SERVICE_NAME says another.
const ServiceName = "opsq"

// Provider exports the spans of one instance. A nil *Provider is tracing off: its methods
// do nothing. Safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// FromEnv returns the instance's Provider when OTEL_EXPORTER_OTLP_ENDPOINT is set, and
// nil (tracing off) when it is not. Spans are sent in batches, in the background, until
// Shutdown.
func FromEnv(ctx context.Context) (*Provider, error) {
	if os.Getenv(EnvEndpoint) == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("the OTLP exporter (%s): %w", EnvEndpoint, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", ServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("the trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{tp: tp, tracer: tp.Tracer("opsq"), prop: propagation.TraceContext{}}, nil
}

// Shutdown sends the spans not sent yet and stops the exporter. Nil-safe.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// ForceFlush sends the spans ended so far. Nil-safe.
func (p *Provider) ForceFlush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.ForceFlush(ctx)
}
