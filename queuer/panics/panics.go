// Package panics keeps a panic in request or strategy code from taking the instance down
// (DESIGN.md §8): a goroutine that runs such code outside net/http's request goroutines
// (where the API's Recover middleware does the same) runs it through Run, which turns a
// panic into an error for that request only, logged once with its stack. It does not
// decide what the request answers: its caller does (the API: 500).
package panics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// ErrPanic is what a recovered panic is (errors.Is); the panic's value and stack go to the
// log, never to the client.
var ErrPanic = errors.New("internal error")

// Error is a recovered panic.
type Error struct {
	What  string // what was running, as given to Run
	Value any    // the panic's value
}

func (e *Error) Error() string { return fmt.Sprintf("%s: panic: %v", e.What, e.Value) }

// Is makes errors.Is(err, ErrPanic) true.
func (e *Error) Is(target error) bool { return target == ErrPanic }

// Run calls fn and returns its error; a panic in fn is logged on log at error level with
// its stack, and returned as an *Error. what names what ran, for the log ("shared reserve
// run").
func Run(ctx context.Context, log *slog.Logger, what string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &Error{What: what, Value: v}
			log.ErrorContext(ctx, "recovered a panic", slog.String("in", what), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
		}
	}()
	return fn()
}
