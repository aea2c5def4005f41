package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/client"
)

// API keys (DESIGN.md §8). With Config.Keys set, every route but /healthz and /readyz
// needs "Authorization: Bearer <key>", checked against the instance's cache of the keys (no
// database round trip). Which role may call which route:
//
//	route                                   producer  consumer  metrics  admin
//	POST /v1/submissions                    yes       -         -        yes
//	GET  /v1/submissions                    yes       -         -        yes
//	GET  /v1/submissions/{id}               yes       yes       -        yes
//	GET  /v1/submissions/{id}/results       yes       -         -        yes
//	POST /v1/submissions/{id}/cancel        own       -         -        yes
//	POST /v1/reserve, complete, fail, extend -        yes       -        yes
//	GET  /v1/cluster                        -         -         -        yes
//	GET  /metrics                           -         -         yes      yes
//	GET  /healthz, /readyz                  no key needed
//
// "own": a producer key cancels only the submissions it created; admin cancels any. A
// missing, unknown, expired or revoked key is 401, a key whose role may not call the route
// 403, both in the usual error shape and with WWW-Authenticate. An unknown route or method
// is 404 or 405 with or without a key. Keys never reach a log: the check logs nothing, and
// error answers never repeat the key.

// These go with every route, so that the table above is written once.
var (
	producerRoles = roles(apikeys.Producer)
	consumerRoles = roles(apikeys.Consumer)
	readerRoles   = roles(apikeys.Producer, apikeys.Consumer)
	adminRoles    = roles()
	metricsRoles  = roles(apikeys.Metrics)
)

// roles is the roles a route allows besides admin, which may call everything.
func roles(r ...apikeys.Role) []apikeys.Role { return append(r, apikeys.Admin) }

// callerKey is where the auth middleware leaves the caller in the echo context.
const callerKey = "opsq.caller"

// authenticate returns the middleware that lets requests with a key of one of allowed
// through. Without Config.Keys (OPSQ_AUTH=off) it lets everything through.
func (s *server) authenticate(allowed []apikeys.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if s.cfg.Keys == nil {
			return next
		}
		return func(c echo.Context) error {
			req := c.Request()
			key, ok := bearer(req.Header.Get(echo.HeaderAuthorization))
			if !ok {
				return unauthorized(c, "missing API key: send Authorization: Bearer <key> (keys are made with \"opsq keys create\")")
			}
			caller, err := s.cfg.Keys.Check(key)
			switch {
			case errors.Is(err, apikeys.ErrUnknown):
				return unauthorized(c, "unknown API key")
			case err != nil:
				return unauthorized(c, err.Error()) // names the key, never the key itself
			case !slices.Contains(allowed, caller.Role):
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="opsq", error="insufficient_scope"`)
				return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
					"the key %q has the role %s, which may not call %s %s (allowed: %s)",
					caller.Name, caller.Role, req.Method, c.Path(), joinRoles(allowed))}
			}
			c.Set(callerKey, caller)
			// A reserve or extend this instance forwards to another carries the caller's
			// key (queuer/forward.go's peer client reads it from the context).
			c.SetRequest(req.WithContext(client.ContextWithKey(req.Context(), key)))
			return next(c)
		}
	}
}

// bearer returns the key of an "Authorization: Bearer <key>" header.
func bearer(h string) (string, bool) {
	scheme, key, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	key = strings.TrimSpace(key)
	return key, key != ""
}

func unauthorized(c echo.Context, message string) error {
	c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="opsq"`)
	return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: message}
}

func joinRoles(rs []apikeys.Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// caller returns the key the request was made with; ok is false without keys.
func caller(c echo.Context) (apikeys.Caller, bool) {
	k, ok := c.Get(callerKey).(apikeys.Caller)
	return k, ok
}

// checkCancel refuses to let a producer key cancel a submission another key created.
func (s *server) checkCancel(c echo.Context, id int64) error {
	k, ok := caller(c)
	if !ok || k.Role == apikeys.Admin {
		return nil
	}
	owner, inProgress, err := s.cfg.Keys.SubmissionOwner(c.Request().Context(), id)
	if err != nil || !inProgress {
		return err // not in progress: the cancel answers 404 or 409 as usual
	}
	if owner != k.ID {
		return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
			"the key %q did not create submission %d: a producer key cancels only its own submissions (an admin key cancels any)", k.Name, id)}
	}
	return nil
}

// createdBy is the id of the key to record on a new submission; 0 without keys.
func createdBy(c echo.Context) int64 {
	k, _ := caller(c)
	return k.ID
}

// forwardContext is parent carrying the key of c's request, for the requests a parked
// reserve forwards to other instances on a context not derived from the request's.
func forwardContext(parent context.Context, c echo.Context) context.Context {
	return client.ContextWithKey(parent, client.KeyFromContext(c.Request().Context()))
}
