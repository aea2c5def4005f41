package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"opsq/api/wire"
)

// Reserve reserves chunks. With req.Wait set it long-polls: the answer comes as soon as at
// least one chunk is reserved, or when the wait runs out with no chunk.
func (c *Client) Reserve(ctx context.Context, req wire.ReserveRequest) ([]wire.ReservedChunk, error) {
	var out wire.Reserved
	if err := c.postJSON(ctx, "/v1/reserve", req, &out); err != nil {
		return nil, err
	}
	return out.Chunks, nil
}

// Complete completes reserved chunks; the results come in request order.
func (c *Client) Complete(ctx context.Context, completions ...wire.Completion) ([]wire.TokenResult, error) {
	var out wire.TokenResults
	if err := c.postJSON(ctx, "/v1/complete", wire.CompleteRequest{Completions: completions}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Fail reports failed attempts; the results come in request order.
func (c *Client) Fail(ctx context.Context, failures ...wire.ChunkFailure) ([]wire.TokenResult, error) {
	var out wire.TokenResults
	if err := c.postJSON(ctx, "/v1/fail", wire.FailRequest{Failures: failures}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Extend extends the leases of reserved chunks by lease (a Go duration; "" for the server's
// default); the results come in request order.
func (c *Client) Extend(ctx context.Context, lease string, tokens ...string) ([]wire.TokenResult, error) {
	var out wire.TokenResults
	if err := c.postJSON(ctx, "/v1/extend", wire.ExtendRequest{Tokens: tokens, Lease: lease}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Throttle asks that no chunk of a submission whose strategic metadata has key = value
// (key "@tenant": of the tenant value) be handed out, by any instance, for d (at most an
// hour): back-pressure from a downstream that said "slow down". A consumer key limited to
// tenants throttles within them only. It returns when the throttle ends.
func (c *Client) Throttle(ctx context.Context, key string, value wire.MetadataValue, d time.Duration) (time.Time, error) {
	var out wire.Throttled
	if err := c.postJSON(ctx, "/v1/throttle", wire.Throttle{Key: key, Value: value, For: d.String()}, &out); err != nil {
		return time.Time{}, err
	}
	return out.Until, nil
}

// LiftThrottle ends the throttles of key = value at once (DELETE /v1/throttle), before
// their end: it returns how many ended (one per tenant of a consumer limited to tenants
// that set it) once no instance holds them any more. A consumer key limited to tenants
// lifts its tenants' only; any other consumer key, and an admin key, lifts them in every
// tenant. None in force is an *Error with status 404.
func (c *Client) LiftThrottle(ctx context.Context, key string, value wire.MetadataValue) (int, error) {
	body, err := json.Marshal(wire.ThrottleLift{Key: key, Value: value})
	if err != nil {
		return 0, fmt.Errorf("opsq: encoding /v1/throttle: %w", err)
	}
	var out wire.ThrottleLifted
	if err := c.call(ctx, http.MethodDelete, "/v1/throttle", nil, "application/json", bytes.NewReader(body), &out); err != nil {
		return 0, err
	}
	return out.Lifted, nil
}

// Cluster returns the instances and their shards.
func (c *Client) Cluster(ctx context.Context) (wire.Cluster, error) {
	var out wire.Cluster
	err := c.call(ctx, http.MethodGet, "/v1/cluster", nil, "", nil, &out)
	return out, err
}

func (c *Client) postJSON(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("opsq: encoding %s: %w", path, err)
	}
	return c.call(ctx, http.MethodPost, path, nil, "application/json", bytes.NewReader(body), out)
}
