package panics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestRun: a panic in fn is an *Error that is ErrPanic, logged once with its stack and
// what ran; fn's own error, or none, passes through; a panic on another goroutine run
// through Run does not end the test binary.
func TestRun(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := context.Background()
	if err := Run(ctx, log, "nothing", func() error { return nil }); err != nil {
		t.Errorf("Run of a function that returns nil = %v; want nil", err)
	}
	mine := errors.New("mine")
	if err := Run(ctx, log, "an error", func() error { return mine }); err != mine {
		t.Errorf("Run of a function that returns an error = %v; want it", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("logged without a panic: %s", buf.String())
	}
	done := make(chan error)
	go func() {
		done <- Run(ctx, log, "a strategy", func() error {
			var m map[string]int
			m["x"]++ // panics: assignment to entry in nil map
			return nil
		})
	}()
	err := <-done
	var pe *Error
	if !errors.Is(err, ErrPanic) || !errors.As(err, &pe) || pe.What != "a strategy" {
		t.Fatalf("Run of a function that panics = %v; want an *Error for \"a strategy\", ErrPanic", err)
	}
	logged := buf.String()
	for _, want := range []string{"recovered a panic", "a strategy", "nil map", "panics_test.go"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log %q; want it to mention %q", logged, want)
		}
	}
}
