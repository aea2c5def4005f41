package api

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
)

// recoverPanics is echo's Recover middleware logging on the instance's logger: a panic in
// a handler answers that request 500 (internal, the usual error shape), and is logged
// with its stack, the route and the method; the instance serves on (DESIGN.md §8). The
// goroutines the API starts itself (parked reserves, park.go) do the same with
// queuer/panics.
func recoverPanics(log *slog.Logger) echo.MiddlewareFunc {
	return middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			log.ErrorContext(c.Request().Context(), "recovered a panic", slog.String("in", c.Request().Method+" "+c.Path()),
				slog.Any("panic", err), slog.String("stack", string(stack)))
			return err
		},
	})
}
