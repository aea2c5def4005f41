package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// preview answers POST /v1/reserve/preview: the body of a reserve, answered with the chunks
// it would hand out now, without tokens; nothing is reserved (queuer.Preview).
func (s *server) preview(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	req, err := s.parseReserve(body)
	if err != nil {
		return err
	}
	req.Tenants, _ = confined(c)
	chunks, err := s.q.Preview(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, previewAnswer(chunks))
}

// previewAnswer is the wire form of a preview.
func previewAnswer(chunks []queuer.PreviewChunk) wire.Preview {
	out := wire.Preview{Chunks: make([]wire.PreviewChunk, len(chunks))}
	for i, ch := range chunks {
		out.Chunks[i] = wire.PreviewChunk{
			SubmissionID: strconv.FormatInt(ch.SubmissionID, 10), ChunkIndex: int64(ch.ChunkIndex),
			StrategicMetadata: ch.StrategicValues,
		}
		if out.Chunks[i].StrategicMetadata == nil {
			out.Chunks[i].StrategicMetadata = map[string]wire.MetadataValue{}
		}
	}
	return out
}
