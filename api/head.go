package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// headKey marks, in an echo.Context, a request that came as HEAD (headAsGet).
const headKey = "opsq.head"

// headAsGet answers HEAD wherever GET is served (RFC 9110 §9.3.2: the status and headers
// of a GET, no body), as load balancers and monitors probe with it: it routes a HEAD as a
// GET, with the GET's roles, and net/http sends no body to a HEAD request. It runs before
// routing (echo's Pre).
func headAsGet(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r := c.Request(); r.Method == http.MethodHead {
			r.Method = http.MethodGet
			c.Set(headKey, true)
		}
		return next(c)
	}
}

// requestMethod is the method the client sent: HEAD for a request headAsGet routes as GET.
func requestMethod(c echo.Context) string {
	if head, _ := c.Get(headKey).(bool); head {
		return http.MethodHead
	}
	return c.Request().Method
}
