// Package identity is who a request is served for: the identity the API authenticated (an
// API key's name, role and tenants), carried in the request's context to the parts that bound
// something per caller (queuer/internal/waiters: the waiters of one key) or pass it on
// (queuer/internal/peers: a forwarded request carries the identity, never the key). It does not
// check keys (api/apikeys does) nor decide what a role may do (api does).
package identity

import "context"

// Caller is an authenticated caller: the name and role of its API key, and its tenants.
// The zero Caller is nobody in particular (OPSQ_AUTH=off).
type Caller struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Tenant is a producer's tenant (DESIGN.md §8).
	Tenant string `json:"tenant,omitempty"`
	// Tenants are the tenants a consumer is limited to when Limited (none at all when
	// empty); a consumer not Limited may reserve from every tenant.
	Tenants []string `json:"tenants,omitempty"`
	Limited bool     `json:"limited,omitempty"`
}

type ctxKey struct{}

// With returns ctx carrying c.
func With(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}

// From returns the caller ctx carries; ok is false when it carries none.
func From(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(ctxKey{}).(Caller)
	return c, ok
}
