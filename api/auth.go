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
	"opsq/queuer"
	"opsq/queuer/identity"
)

// API keys (DESIGN.md §8). With Config.Keys set, every route but the open ones (/healthz,
// /readyz, /v1/openapi.json and the dashboard's login) needs "Authorization: Bearer <key>",
// checked against the instance's cache of the keys (no database round trip). Routes below
// is who may call which route.
//
// A missing, unknown, expired or revoked key is 401, a key whose role may not call the
// route 403, both in the usual error shape and with WWW-Authenticate. An unknown route or
// method is 404 or 405 with or without a key. Keys never reach a log: a failed check is
// logged and throttled per address without the key (authfail.go), and error answers
// never repeat the key.

// These go with every route (api.go and Routes).
var (
	producerRoles = roles(apikeys.Producer)
	consumerRoles = roles(apikeys.Consumer)
	readerRoles   = roles(apikeys.Producer, apikeys.Consumer)
	adminRoles    = roles()
	metricsRoles  = roles(apikeys.Metrics)
)

// Route is one route the server serves (api.go registers it), and who may call it.
type Route struct {
	Method string
	// Path as registered with echo: ":id" is a parameter, "*" the rest of the path.
	Path string
	// Roles may call it; admin may call everything. Empty: open to all, no key needed.
	Roles []apikeys.Role
	// Own: the route acts on a submission. Like every route on a submission id, a
	// producer key may call it only on its tenant's submissions (another tenant's is 404,
	// as an unknown id); an admin key on any.
	Own bool
	// Dashboard: a route of the dashboard (api/ui), which takes an admin key from the
	// cookie its login page sets, never from the Authorization header. Without a valid
	// admin key there, a page redirects to the login page (303) and anything else is 401.
	Dashboard bool
	// Instances: a route only the instances of the cluster call, signed with the cluster
	// key (api/forwarded_auth.go) for a caller of Roles; a request with any key is 403. It
	// is not part of the documented REST API.
	Instances bool
}

// Routes is the role table of the API: every route the server serves, with the roles that
// may call it. The tests check the server against it, route by route and role by role
// (api/auth_test.go in process, cmd/opsq/authmatrix_test.go on real instances), and that
// it lists every route the server registers, so that a new route needs a line here.
var Routes = []Route{
	{Method: http.MethodPost, Path: "/v1/submissions", Roles: producerRoles},
	{Method: http.MethodGet, Path: "/v1/submissions", Roles: producerRoles},
	{Method: http.MethodGet, Path: "/v1/submissions/:id", Roles: readerRoles},
	{Method: http.MethodGet, Path: "/v1/submissions/:id/results", Roles: producerRoles},
	{Method: http.MethodGet, Path: "/v1/submissions/:id/failures", Roles: producerRoles},
	{Method: http.MethodPost, Path: "/v1/submissions/:id/cancel", Roles: producerRoles, Own: true},
	{Method: http.MethodPost, Path: "/v1/submissions/:id/retry", Roles: producerRoles, Own: true},
	{Method: http.MethodPost, Path: "/v1/submissions/:id/pause", Roles: producerRoles, Own: true},
	{Method: http.MethodPost, Path: "/v1/submissions/:id/resume", Roles: producerRoles, Own: true},
	{Method: http.MethodPost, Path: "/v1/submissions/retry", Roles: producerRoles},
	{Method: http.MethodPost, Path: "/v1/reserve", Roles: consumerRoles},
	{Method: http.MethodPost, Path: "/v1/reserve/preview", Roles: consumerRoles},
	{Method: http.MethodPost, Path: queuer.GiveBackPath, Roles: consumerRoles, Instances: true},
	{Method: http.MethodPost, Path: "/v1/complete", Roles: consumerRoles},
	{Method: http.MethodPost, Path: "/v1/fail", Roles: consumerRoles},
	{Method: http.MethodPost, Path: "/v1/extend", Roles: consumerRoles},
	{Method: http.MethodPost, Path: "/v1/throttle", Roles: consumerRoles},
	{Method: http.MethodDelete, Path: "/v1/throttle", Roles: consumerRoles},
	{Method: http.MethodPost, Path: "/v1/schedules", Roles: producerRoles},
	{Method: http.MethodGet, Path: "/v1/schedules", Roles: producerRoles},
	{Method: http.MethodGet, Path: "/v1/schedules/:name", Roles: producerRoles},
	{Method: http.MethodPut, Path: "/v1/schedules/:name", Roles: producerRoles},
	{Method: http.MethodDelete, Path: "/v1/schedules/:name", Roles: producerRoles},
	{Method: http.MethodPost, Path: "/v1/schedules/:name/pause", Roles: producerRoles},
	{Method: http.MethodPost, Path: "/v1/schedules/:name/resume", Roles: producerRoles},
	{Method: http.MethodPost, Path: "/v1/schedules/:name/trigger", Roles: producerRoles},
	{Method: http.MethodPost, Path: "/v1/schedules/:name/backfill", Roles: producerRoles},
	{Method: http.MethodGet, Path: "/v1/cluster", Roles: adminRoles},
	{Method: http.MethodGet, Path: "/v1/openapi.json"}, // the API's description
	{Method: http.MethodGet, Path: "/metrics", Roles: metricsRoles},
	{Method: http.MethodGet, Path: "/healthz"},
	{Method: http.MethodGet, Path: "/readyz"},

	// The dashboard: its login and what the login page needs are open, the rest is admin's.
	{Method: http.MethodGet, Path: "/ui", Dashboard: true}, // a redirect to /ui/
	{Method: http.MethodGet, Path: "/ui/static/*", Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/login", Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/login", Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/logout", Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/overview.json", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions.json", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/progress", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/failures.json", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/chunks", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/chunks/:index", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/chunks/:index/retry", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/submissions/:id/chunks/:index/retry", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/cancel", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/submissions/:id/cancel", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/:id/confirm", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/submissions/:id/action", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/submissions/confirm", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/submissions/action", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/cluster", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/cluster.json", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/cluster/confirm", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/cluster/action", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/strategy", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/throttles/confirm", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/throttles/lift", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/schedules", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/schedules/:tenant/:name", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodGet, Path: "/ui/schedules/:tenant/:name/confirm", Roles: adminRoles, Dashboard: true},
	{Method: http.MethodPost, Path: "/ui/schedules/:tenant/:name/action", Roles: adminRoles, Dashboard: true},
}

// Open reports whether r needs no key.
func (r Route) Open() bool { return len(r.Roles) == 0 }

// Allows reports whether a key of role may call r (on its tenant's submissions, for a
// route on a submission).
func (r Route) Allows(role apikeys.Role) bool {
	return !r.Instances && (r.Open() || slices.Contains(r.Roles, role))
}

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
			if handled, err := s.forwardedCaller(c, allowed); handled { // forwarded_auth.go
				if err != nil {
					return err
				}
				return next(c)
			}
			req := c.Request()
			key, ok := bearer(req.Header.Get(echo.HeaderAuthorization))
			if !ok {
				return s.authFails.failed(c, "", "missing API key", unauthorized(c, "missing API key: send Authorization: Bearer <key> (keys are made with \"opsq keys create\")"))
			}
			caller, err := s.cfg.Keys.Check(key)
			switch {
			case errors.Is(err, apikeys.ErrUnknown):
				return s.authFails.failed(c, key, "unknown API key", unauthorized(c, "unknown API key"))
			case err != nil: // names the key, never the key itself
				return s.authFails.failed(c, key, err.Error(), unauthorized(c, err.Error()))
			case !slices.Contains(allowed, caller.Role):
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="opsq", error="insufficient_scope"`)
				return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
					"the key %q has the role %s, which may not call %s %s (allowed: %s)",
					caller.Name, caller.Role, req.Method, c.Path(), joinRoles(allowed))}
			}
			c.Set(callerKey, caller)
			// The caller's identity, never its key, goes with a reserve or extend this
			// instance forwards to another (queuer/internal/peers signs it); it bounds the caller's
			// waiters too (queuer/internal/waiters).
			c.SetRequest(req.WithContext(identity.With(req.Context(), identity.Caller{Name: caller.Name, Role: string(caller.Role),
				Tenant: caller.Tenant, Tenants: caller.Tenants, Limited: caller.Tenants != nil})))
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

// Tenants (DESIGN.md §8). A producer key sees, through every route, only its tenant's
// submissions; a consumer key limited to some tenants only theirs; an admin key, and every
// request without keys (OPSQ_AUTH=off), all of them. A submission the caller may not see
// is answered as an unknown id (404): nothing tells that it exists.

// confined returns the tenants the caller may see, and false when it may see all.
func confined(c echo.Context) ([]string, bool) {
	k, ok := caller(c)
	if !ok {
		return nil, false
	}
	return k.Confined()
}

// checkTenant answers as for an unknown id when submission id belongs to a tenant the
// caller may not see. Nothing is read for a caller who sees all. For the others, an id of
// another tenant and an unknown id take the same path and the same statement
// (Queuer.TenantIn), so that not even the time of the 404 tells them apart; only the
// caller's own ids may be answered from the instance's cache.
func (s *server) checkTenant(c echo.Context, id int64) error {
	tenants, ok := confined(c)
	if !ok {
		return nil
	}
	return s.q.TenantIn(c.Request().Context(), id, tenants)
}

// ownTenant returns the tenant a producer key is confined to; false for a caller who may
// name any tenant (an admin key, OPSQ_AUTH=off).
func ownTenant(c echo.Context) (string, bool) {
	k, ok := caller(c)
	if !ok || k.Role != apikeys.Producer {
		return "", false
	}
	return k.Tenant, true
}

// submitTenant settles the tenant of a new submission: a producer key's own (naming another
// is 403), or, for an admin key and without keys, the one the submission names
// (queuer.TenantDefault if none).
func submitTenant(c echo.Context, named string) (string, error) {
	own, ok := ownTenant(c)
	if !ok {
		return named, nil
	}
	if named != "" && named != own {
		k, _ := caller(c)
		return "", &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
			"tenant: the key %q belongs to the tenant %q and may not submit for %q (only an admin key names a tenant)", k.Name, own, named)}
	}
	return own, nil
}

// createdBy is the id of the key to record on a new submission; 0 without keys.
func createdBy(c echo.Context) int64 {
	k, _ := caller(c)
	return k.ID
}

// forwardContext is parent carrying the caller of c's request, for the requests a parked
// reserve forwards to other instances on a context not derived from the request's.
func forwardContext(parent context.Context, c echo.Context) context.Context {
	if id, ok := identity.From(c.Request().Context()); ok {
		return identity.With(parent, id)
	}
	return parent
}
