package client

import (
	"context"
	"iter"

	"opsq/api/wire"
)

// AllFailures yields every chunk of submission id that failed at least one attempt, in
// chunk order, a page of Failures at a time (opts.Limit is the page size; opts.After where
// to start). It stops at the first error, yielded with a zero FailedChunk.
func (c *Client) AllFailures(ctx context.Context, id string, opts FailuresOptions) iter.Seq2[wire.FailedChunk, error] {
	return func(yield func(wire.FailedChunk, error) bool) {
		for {
			page, err := c.Failures(ctx, id, opts)
			if err != nil {
				yield(wire.FailedChunk{}, err)
				return
			}
			for _, f := range page.Failures {
				if !yield(f, nil) {
					return
				}
			}
			if page.NextAfter == nil {
				return
			}
			opts.After = page.NextAfter
		}
	}
}

// AllSubmissions yields every submission List selects with opts, newest first, a page at
// a time. It stops at the first error, yielded with a zero Status.
func (c *Client) AllSubmissions(ctx context.Context, opts ListOptions) iter.Seq2[wire.Status, error] {
	return func(yield func(wire.Status, error) bool) {
		for {
			page, err := c.List(ctx, opts)
			if err != nil {
				yield(wire.Status{}, err)
				return
			}
			for _, s := range page.Submissions {
				if !yield(s, nil) {
					return
				}
			}
			if page.NextAfter == nil || *page.NextAfter == "" {
				return
			}
			opts.After = *page.NextAfter
		}
	}
}
