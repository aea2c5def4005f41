package handout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"opsq/queuer/opsqtype"
)

// UnmarshalJSON reads a chunk as a reserve answers it (DESIGN.md §3: the REST form, with
// the submission id a decimal string, the input a string, the strategic metadata an
// object), so that a chunk another instance handed out for a forwarded reserve becomes
// this engine's chunk in one step. What is not that form is an error, never a zero.
func (ch *Chunk) UnmarshalJSON(b []byte) error {
	var in struct {
		Token             *string                           `json:"token"`
		SubmissionID      *string                           `json:"submission_id"`
		ChunkIndex        *int32                            `json:"chunk_index"`
		Input             *string                           `json:"input"`
		Prefix            *string                           `json:"prefix"`
		Metadata          string                            `json:"metadata"`
		StrategicMetadata map[string]opsqtype.MetadataValue `json:"strategic_metadata"`
		Retries           int32                             `json:"retries"`
		ExpiresAt         time.Time                         `json:"expires_at"`
		Traceparent       string                            `json:"traceparent"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("a reserved chunk: %w", err)
	}
	if in.Token == nil || in.SubmissionID == nil || in.ChunkIndex == nil {
		return fmt.Errorf("a reserved chunk without a token, submission_id or chunk_index: %.200s", b)
	}
	if (in.Input == nil) == (in.Prefix == nil) {
		return fmt.Errorf("a reserved chunk with neither or both of input and prefix: %.200s", b)
	}
	id, err := strconv.ParseInt(*in.SubmissionID, 10, 64)
	if err != nil {
		return fmt.Errorf("a reserved chunk's submission_id %q: %w", *in.SubmissionID, err)
	}
	if in.StrategicMetadata == nil {
		in.StrategicMetadata = map[string]opsqtype.MetadataValue{}
	}
	strategic, err := json.Marshal(in.StrategicMetadata)
	if err != nil {
		return err
	}
	*ch = Chunk{
		Token: *in.Token, SubmissionID: id, ChunkIndex: *in.ChunkIndex, Prefix: in.Prefix, Metadata: in.Metadata,
		StrategicMetadata: strategic, StrategicValues: in.StrategicMetadata, Retries: in.Retries,
		ExpiresAt: in.ExpiresAt, Traceparent: in.Traceparent,
	}
	if in.Input != nil {
		ch.Input = []byte(*in.Input)
	}
	return nil
}
