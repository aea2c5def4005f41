package client

import "context"

// Preview is the answer to POST /v1/reserve/preview: the chunks a reserve of the same body
// would hand out now, in order, with no token; nothing is reserved.
type Preview struct {
	Chunks []PreviewChunk `json:"chunks"`
}

// PreviewChunk is one chunk of a Preview.
type PreviewChunk struct {
	SubmissionID      string                   `json:"submission_id"`
	ChunkIndex        int64                    `json:"chunk_index"`
	StrategicMetadata map[string]MetadataValue `json:"strategic_metadata"`
}

// Preview asks which chunks a reserve of req would hand out now, without reserving them.
func (c *Client) Preview(ctx context.Context, req ReserveRequest) ([]PreviewChunk, error) {
	var out Preview
	if err := c.postJSON(ctx, "/v1/reserve/preview", req, &out); err != nil {
		return nil, err
	}
	return out.Chunks, nil
}
