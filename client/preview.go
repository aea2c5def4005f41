package client

import (
	"context"

	"opsq/api/wire"
)

// Preview asks which chunks a reserve of req would hand out now, without reserving them.
func (c *Client) Preview(ctx context.Context, req wire.ReserveRequest) ([]wire.PreviewChunk, error) {
	var out wire.Preview
	if err := c.postJSON(ctx, "/v1/reserve/preview", req, &out); err != nil {
		return nil, err
	}
	return out.Chunks, nil
}
