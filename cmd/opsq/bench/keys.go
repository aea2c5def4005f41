package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api"
	"opsq/api/apikeys"
)

// API keys (DESIGN.md §8). By default the bench runs its instances with
// OPSQ_AUTH=required, as a production cluster runs, and makes a key of each role through
// the engine (apikeys.Create, as "opsq keys create" does) in the scratch database, once
// the first instance has migrated it. Every request the bench sends carries the key of the
// role that api.Routes gives its route: producer for submitting, reading statuses and
// results; consumer for reserving, completing, failing and extending; metrics for
// /metrics; admin for /v1/cluster and for cancels (the bench cancels the submissions it is
// done with, some of which it inserted with the engine rather than a producer key).
// --auth off runs the instances without keys, and the requests carry none.

// The values of Config.Auth (OPSQ_AUTH of the instances).
const (
	AuthRequired = "required"
	AuthOff      = "off"
)

// benchKeys are the keys the bench's requests carry, by role; empty with --auth off.
type benchKeys map[apikeys.Role]string

// benchKeyPrefix starts the names of the bench's keys.
const benchKeyPrefix = "opsq-bench-"

// createKeys makes a key of each role in the scratch database db, in one transaction: the
// instances learn them all at once (on the NOTIFY of the commit, or at their start).
func createKeys(ctx context.Context, db *pgxpool.Pool) (benchKeys, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("making the API keys: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // nothing to undo after Commit
	keys := benchKeys{}
	for _, role := range apikeys.Roles {
		_, key, err := apikeys.Create(ctx, tx, benchKeyPrefix+string(role), role, 0)
		if err != nil {
			return nil, fmt.Errorf("making the API keys: %w", err)
		}
		keys[role] = key
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("making the API keys: %w", err)
	}
	return keys, nil
}

// forRoute returns the key a request of method to path carries: "" for a route open to
// all, a route api.Routes does not know (a hostile request's invented method, say), or
// without keys.
func (k benchKeys) forRoute(method, path string) string {
	if len(k) == 0 {
		return ""
	}
	for _, r := range api.Routes {
		if r.Method != method || !matchRoute(r.Path, path) {
			continue
		}
		switch {
		case r.Open():
			return ""
		case r.Own:
			return k[apikeys.Admin]
		}
		return k[r.Roles[0]] // the narrowest role: admin, which may call everything, comes last
	}
	return ""
}

// matchRoute reports whether path is one of pattern's, an echo route: ":name" matches one
// segment, a final "*" the rest.
func matchRoute(pattern, path string) bool {
	ps, segs := strings.Split(pattern, "/"), strings.Split(path, "/")
	for i, p := range ps {
		switch {
		case p == "*" && i == len(ps)-1:
			return true
		case i >= len(segs):
			return false
		case strings.HasPrefix(p, ":"):
			if segs[i] == "" {
				return false
			}
		case p != segs[i]:
			return false
		}
	}
	return len(ps) == len(segs)
}

// header is the Authorization header line of a request of method to path, as raw HTTP/1.1
// ("Authorization: Bearer …\r\n"), or "" when it carries no key.
func (k benchKeys) header(method, path string) string {
	if key := k.forRoute(method, path); key != "" {
		return "Authorization: Bearer " + key + "\r\n"
	}
	return ""
}

// transport returns base, with the key of its route added to each request that has no
// Authorization header of its own; base itself without keys.
func (k benchKeys) transport(base http.RoundTripper) http.RoundTripper {
	if len(k) == 0 {
		return base
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Header.Get("Authorization") == "" {
			if key := k.forRoute(req.Method, req.URL.Path); key != "" {
				req = req.Clone(req.Context()) // a RoundTripper must not change the request
				req.Header.Set("Authorization", "Bearer "+key)
			}
		}
		return base.RoundTrip(req)
	})
}
