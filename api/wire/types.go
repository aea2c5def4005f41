package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// The JSON shapes of the REST API v1 (DESIGN.md §3). The server encodes its answers with
// these types too, so the wire format is written down once, here.

// State is the state of a submission: where its row is (DESIGN.md §1). The engine reads it
// from the opsq.submission_status view, the server answers it, and clients branch on it.
type State string

// Submission states.
const (
	StateInProgress State = "in_progress"
	StateCompleted  State = "completed"
	StateFailed     State = "failed"
	StateCancelled  State = "cancelled"
)

// States returns every submission state, in the order of a submission's life.
func States() []State {
	return []State{StateInProgress, StateCompleted, StateFailed, StateCancelled}
}

// Finished reports whether s is a final state.
func (s State) Finished() bool { return s != StateInProgress }

// SubmissionHeader is everything a submission carries but its chunks: the body of a JSON
// submission without "chunks", or the first line of an NDJSON submission.
type SubmissionHeader struct {
	// Metadata is opaque text handed to every consumer of the submission's chunks.
	Metadata string `json:"metadata,omitempty"`
	// StrategicMetadata maps keys to integer (int64) or string values that strategies and
	// lookups use. Use Int and String to build values.
	StrategicMetadata map[string]MetadataValue `json:"strategic_metadata,omitempty"`
	// Priority orders submissions for the custom_priority strategy, higher first.
	Priority int64 `json:"priority,omitempty"`
	// MaxRetries allows that many retries (MaxRetries+1 attempts) per chunk; nil means the
	// server's default_max_retries setting.
	MaxRetries *int `json:"max_retries,omitempty"`
	// IdempotencyKey makes a repeated POST return the first submission.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Prefix and ChunkCount select object-storage mode: the chunks are Prefix+index, read
	// by the consumer; opsq stores no content.
	Prefix     string `json:"prefix,omitempty"`
	ChunkCount int64  `json:"chunk_count,omitempty"`
}

// Submission is a whole JSON submission.
type Submission struct {
	SubmissionHeader
	Chunks []string `json:"chunks,omitempty"`
}

// Created is the answer to a successful POST /v1/submissions.
type Created struct {
	ID          string `json:"id"`
	ChunksTotal int64  `json:"chunks_total"`
}

// Status is the state of one submission.
type Status struct {
	ID                string                   `json:"id"`
	State             State                    `json:"state"`
	ChunksTotal       int64                    `json:"chunks_total"`
	ChunksDone        int64                    `json:"chunks_done"`
	ChunksFailed      int64                    `json:"chunks_failed"`
	Priority          int64                    `json:"priority"`
	Metadata          string                   `json:"metadata"`
	StrategicMetadata map[string]MetadataValue `json:"strategic_metadata"`
	Prefix            string                   `json:"prefix,omitempty"`
	CreatedAt         time.Time                `json:"created_at"`
	FinishedAt        *time.Time               `json:"finished_at"`
	Failure           *Failure                 `json:"failure,omitempty"`
}

// Finished reports whether the submission has reached a final state.
func (s Status) Finished() bool { return s.State.Finished() }

// Failure says why a submission failed.
type Failure struct {
	ChunkIndex int64  `json:"chunk_index"`
	Error      string `json:"error"`
}

// StatusList is one page of GET /v1/submissions.
type StatusList struct {
	Submissions []Status `json:"submissions"`
	NextAfter   *string  `json:"next_after"`
}

// Result is one line of GET /v1/submissions/{id}/results.
type Result struct {
	ChunkIndex int64  `json:"chunk_index"`
	Output     string `json:"output"`
}

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an error answer.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// MetadataValue is a strategic metadata value: an int64 or a string, where 42 and "42"
// are different values; the zero value is the integer 0. It is opsq's one type for such a
// value: submissions and reserved chunks carry it, and a strategy's select_only keeps one.
type MetadataValue struct {
	isString bool
	i        int64
	s        string
}

// Int returns an integer metadata value.
func Int(i int64) MetadataValue { return MetadataValue{i: i} }

// String returns a string metadata value.
func String(s string) MetadataValue { return MetadataValue{isString: true, s: s} }

// IsString reports whether the value is a string.
func (v MetadataValue) IsString() bool { return v.isString }

// Int64 returns the integer value (0 for a string).
func (v MetadataValue) Int64() int64 { return v.i }

// Str returns the string value ("" for an integer).
func (v MetadataValue) Str() string { return v.s }

// String formats the value as it is written in JSON.
func (v MetadataValue) String() string {
	b, _ := v.MarshalJSON()
	return string(b)
}

// MarshalJSON writes a JSON number or string.
func (v MetadataValue) MarshalJSON() ([]byte, error) {
	if v.isString {
		return json.Marshal(v.s)
	}
	return json.Marshal(v.i)
}

// UnmarshalJSON accepts a JSON integer that fits in an int64, or a JSON string.
func (v *MetadataValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*v = String(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("must be an integer or a string")
	}
	i, err := n.Int64()
	if err != nil {
		return fmt.Errorf("must be an integer or a string, not %s", b)
	}
	*v = Int(i)
	return nil
}

// Consumer API.

// ForwardedHeader marks a request that one instance forwarded to another; it is answered
// from the receiving instance's own shards only.
const ForwardedHeader = "Opsq-Forwarded"

// ForwardedSignatureHeader carries the signature of a forwarded request, made with the
// cluster key (DESIGN.md §8): a request marked forwarded without a valid one is refused.
const ForwardedSignatureHeader = "Opsq-Forwarded-Signature"

// TokenStatus is the outcome for one token of complete, fail or extend: what the engine
// decided for the item and what the server answers for it.
type TokenStatus string

// Token statuses: complete answers completed, already_finished or unknown; fail answers
// retrying, failed, already_finished or unknown; extend answers extended, lost,
// already_finished or unknown.
const (
	StatusCompleted       TokenStatus = "completed"
	StatusRetrying        TokenStatus = "retrying"
	StatusFailed          TokenStatus = "failed"
	StatusExtended        TokenStatus = "extended"
	StatusLost            TokenStatus = "lost"
	StatusAlreadyFinished TokenStatus = "already_finished"
	StatusUnknown         TokenStatus = "unknown"
)

// ReserveRequest is the body of POST /v1/reserve. Zero fields take the server's defaults:
// max 1, strategy "random", lease 5m, wait 0.
type ReserveRequest struct {
	Max int `json:"max,omitempty"`
	// Strategy is a strategy's JSON form, such as "random" (quoted) or {"select_only": …}.
	Strategy json.RawMessage `json:"strategy,omitempty"`
	Lease    string          `json:"lease,omitempty"` // a Go duration, such as "5m"
	Wait     string          `json:"wait,omitempty"`  // a Go duration, at most "60s"
	Consumer string          `json:"consumer,omitempty"`
}

// Reserved is the answer to POST /v1/reserve.
type Reserved struct {
	Chunks []ReservedChunk `json:"chunks"`
}

// ReservedChunk is one reserved chunk. Exactly one of Input (inline content) and Prefix
// (object-storage mode: read Prefix+ChunkIndex yourself) is set.
type ReservedChunk struct {
	Token             string                   `json:"token"`
	SubmissionID      string                   `json:"submission_id"`
	ChunkIndex        int64                    `json:"chunk_index"`
	Input             *string                  `json:"input,omitempty"`
	Prefix            *string                  `json:"prefix,omitempty"`
	Metadata          string                   `json:"metadata"`
	StrategicMetadata map[string]MetadataValue `json:"strategic_metadata"`
	Retries           int64                    `json:"retries"`
	ExpiresAt         time.Time                `json:"expires_at"`
}

// Completion completes one reserved chunk with its output.
type Completion struct {
	Token  string `json:"token"`
	Output string `json:"output"`
}

// CompleteRequest is the body of POST /v1/complete.
type CompleteRequest struct {
	Completions []Completion `json:"completions"`
}

// ChunkFailure reports a failed attempt at one reserved chunk. Retry nil means true.
type ChunkFailure struct {
	Token string `json:"token"`
	Error string `json:"error"`
	Retry *bool  `json:"retry,omitempty"`
}

// FailRequest is the body of POST /v1/fail.
type FailRequest struct {
	Failures []ChunkFailure `json:"failures"`
}

// ExtendRequest is the body of POST /v1/extend.
type ExtendRequest struct {
	Tokens []string `json:"tokens"`
	Lease  string   `json:"lease,omitempty"`
}

// TokenResult is the outcome for one token of complete, fail or extend.
type TokenResult struct {
	Token     string      `json:"token"`
	Status    TokenStatus `json:"status"`
	ExpiresAt *time.Time  `json:"expires_at,omitempty"`
}

// TokenResults is the answer to complete, fail and extend, in request order.
type TokenResults struct {
	Results []TokenResult `json:"results"`
}

// Cluster is the answer to GET /v1/cluster: the one wire shape of who holds which shard
// (the server builds it from the claims package's own view, which has no JSON of its own).
type Cluster struct {
	ShardCount int               `json:"shard_count"`
	Instances  []ClusterInstance `json:"instances"`
	Unclaimed  []int             `json:"unclaimed"` // enabled shards nobody holds
	Disabled   []int             `json:"disabled"`  // shards an operator disabled
}

// ClusterInstance is one instance in GET /v1/cluster.
type ClusterInstance struct {
	ID           string         `json:"id"`
	AdvertiseURL string         `json:"advertise_url"`
	StartedAt    *time.Time     `json:"started_at"`   // null for a claimant no longer registered
	HeartbeatAt  *time.Time     `json:"heartbeat_at"` // null for a claimant no longer registered
	Live         bool           `json:"live"`         // heartbeat younger than instance_heartbeat_timeout
	Draining     bool           `json:"draining"`
	Shards       []ClusterShard `json:"shards"`
}

// ClaimState is the state of a claimed shard in GET /v1/cluster.
type ClaimState string

// Claim states.
const (
	// ClaimActive: the owner reserves from the shard.
	ClaimActive ClaimState = "active"
	// ClaimDraining: the owner reserves nothing more from the shard and releases it once
	// nothing of it is in flight.
	ClaimDraining ClaimState = "draining"
)

// ClusterShard is one claimed shard in GET /v1/cluster.
type ClusterShard struct {
	Shard         int        `json:"shard"`
	Generation    int64      `json:"generation"`
	State         ClaimState `json:"state"`
	Inflight      int        `json:"inflight"`
	Available     bool       `json:"available"`
	SoftExpiresAt *time.Time `json:"soft_expires_at"`
	HardExpiresAt *time.Time `json:"hard_expires_at"`
}

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
