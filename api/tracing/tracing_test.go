package tracing

import (
	"testing"
)

// TestOffInstallsNothing: without OTEL_EXPORTER_OTLP_ENDPOINT there is no provider, and
// the nil one installs no pgx tracer and is safe to shut down.
func TestOffInstallsNothing(t *testing.T) {
	t.Setenv(EnvEndpoint, "")
	p, err := FromEnv(t.Context())
	if err != nil || p != nil {
		t.Fatalf("FromEnv without %s = %v, %v; want nil, nil", EnvEndpoint, p, err)
	}
	if tr := p.QueryTracer(); tr != nil {
		t.Errorf("the nil provider's QueryTracer = %v; want nil", tr)
	}
	if err := p.ForceFlush(t.Context()); err != nil {
		t.Errorf("ForceFlush: %v", err)
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestOperation(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- What a consumer gets.\nSELECT id FROM t":         "SELECT",
		"-- a\n-- b\n\n  with c AS (DELETE FROM t) SELECT 1": "WITH",
		"INSERT INTO t VALUES (1)":                           "INSERT",
		"select(1)":                                          "SELECT",
		"-- only a comment":                                  "query",
		"":                                                   "query",
	} {
		if got := operation(sql); got != want {
			t.Errorf("operation(%q) = %q; want %q", sql, got, want)
		}
	}
}
