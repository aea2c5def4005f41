package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPanicInAHandlerIs500: a panic in a handler (injected through Config.Ready, which
// /readyz calls) answers that request 500 in the usual error shape, without the panic's
// value, logs it with its stack on the instance's logger, and the server serves on.
func TestPanicInAHandlerIs500(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	var logged syncBuffer
	srv := httptest.NewServer(New(Config{
		Queuer: e.Q,
		Ready:  func(context.Context) error { panic("the secret value of a panic") },
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
	}))
	defer srv.Close()
	r := httpCall(t, http.MethodGet, srv.URL+"/readyz", "", nil)
	expectError(t, r, http.StatusInternalServerError, "internal")
	if strings.Contains(string(r.Body), "secret") {
		t.Errorf("the answer %s tells the panic's value; want it in the log only", r.Body)
	}
	for _, want := range []string{"recovered a panic", "GET /readyz", "the secret value of a panic", "recover_test.go"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log %q; want it to mention %q", logged.String(), want)
		}
	}
	if r := httpCall(t, http.MethodGet, srv.URL+"/healthz", "", nil); r.Status != http.StatusOK {
		t.Errorf("GET /healthz after the panic: %d; want 200", r.Status)
	}
}
