package wire

import (
	"encoding/json"
	"fmt"
	"time"

	"opsq/queuer/opsqtype"
)

// The JSON shapes of the REST API v1 (DESIGN.md §3). The server encodes its answers with
// these types too, so the wire format is written down once, here.

// The vocabulary the engine, the wire and the clients share is package opsqtype's; these
// are its names as the wire has always spelled them.
type (
	State         = opsqtype.State
	MetadataValue = opsqtype.MetadataValue
	TokenStatus   = opsqtype.TokenStatus
	TokenResult   = opsqtype.TokenResult
)

// Submission states.
const (
	StateInProgress = opsqtype.StateInProgress
	StateCompleted  = opsqtype.StateCompleted
	StateFailed     = opsqtype.StateFailed
	StateCancelled  = opsqtype.StateCancelled
)

// States returns every submission state, in the order of a submission's life.
func States() []State { return opsqtype.States() }

// The list's filters (GET /v1/submissions?state=) beyond the states: an in-progress
// submission's phase. They are never a submission's state: a paused submission's state is
// in_progress, with "paused": true; a scheduled one's is in_progress, with a not_before
// still ahead (docs/operations.md, "Paused and scheduled submissions").
const (
	// ListRunning: in progress, neither paused nor before its not_before.
	ListRunning State = "running"
	// ListPaused: in progress and paused, whatever its not_before.
	ListPaused State = "paused"
	// ListScheduled: in progress, not paused, before its not_before.
	ListScheduled State = "scheduled"
)

// ListStates returns what the list's state filter takes: in_progress (every phase),
// running, paused, scheduled, completed, failed and cancelled.
func ListStates() []State {
	return []State{StateInProgress, ListRunning, ListPaused, ListScheduled, StateCompleted, StateFailed, StateCancelled}
}

// Phase returns what the list's filter calls s's phase: running, paused or scheduled for
// a submission in progress at now, "" for a finished one.
func (s Status) Phase(now time.Time) State {
	switch {
	case s.State != StateInProgress:
		return ""
	case s.Paused:
		return ListPaused
	case s.NotBefore != nil && s.NotBefore.After(now):
		return ListScheduled
	}
	return ListRunning
}

// Token statuses (opsqtype's).
const (
	StatusCompleted       = opsqtype.StatusCompleted
	StatusRetrying        = opsqtype.StatusRetrying
	StatusFailed          = opsqtype.StatusFailed
	StatusExtended        = opsqtype.StatusExtended
	StatusLost            = opsqtype.StatusLost
	StatusAlreadyFinished = opsqtype.StatusAlreadyFinished
	StatusUnknown         = opsqtype.StatusUnknown
)

// Int returns an integer metadata value.
func Int(i int64) MetadataValue { return opsqtype.Int(i) }

// String returns a string metadata value.
func String(s string) MetadataValue { return opsqtype.String(s) }

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
	// OnFailure is what a chunk whose attempts are spent does to the submission:
	// "fail_submission" (the default), "continue", {"fail_after": {"chunks": K}} or
	// {"fail_after": {"fraction": F}} (DESIGN.md §3). Use OnFailureContinue and the others.
	OnFailure json.RawMessage `json:"on_failure,omitempty"`
	// RetryBackoff is how long a retried chunk waits before it is reservable again.
	RetryBackoff *RetryBackoff `json:"retry_backoff,omitempty"`
	// NotBefore is an RFC 3339 time or a duration from now (at most 30 days): nothing of the
	// submission is handed out before then.
	NotBefore string `json:"not_before,omitempty"`
	// Tenant owns the submission; only admin keys (and servers without keys) may name
	// one: a producer key's submissions are its tenant's.
	Tenant string `json:"tenant,omitempty"`
	// After is the submissions (ids, at most MaxAfter, of the same tenant) it starts after:
	// it is created at once but hands nothing out until they finished (DESIGN.md §3).
	After []string `json:"after,omitempty"`
	// AfterPolicy is AfterCompleted (the default: start when every parent completed; a
	// parent failed or cancelled cancels it) or AfterFinished (start whatever their states).
	AfterPolicy string `json:"after_policy,omitempty"`
}

// The policies of SubmissionHeader.AfterPolicy, and the bound of After.
const (
	AfterCompleted = "completed"
	AfterFinished  = "finished"
	MaxAfter       = 100
)

// The forms of SubmissionHeader.OnFailure.
var (
	OnFailureFailSubmission = json.RawMessage(`"fail_submission"`)
	OnFailureContinue       = json.RawMessage(`"continue"`)
)

// OnFailureAfterChunks fails the submission once more than k of its chunks have failed.
func OnFailureAfterChunks(k int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"fail_after":{"chunks":%d}}`, k))
}

// OnFailureAfterFraction fails the submission once more than f × chunks_total of its
// chunks have failed.
func OnFailureAfterFraction(f float64) json.RawMessage {
	b, _ := json.Marshal(map[string]map[string]float64{"fail_after": {"fraction": f}})
	return b
}

// RetryBackoff is a submission's retry backoff: a chunk retried for the n-th time waits
// Initial × Factor^(n−1), at most Max, ±20 % jitter. Durations are Go duration strings;
// empty fields are the defaults ("1s", 2, "1m").
type RetryBackoff struct {
	Initial string  `json:"initial,omitempty"`
	Factor  float64 `json:"factor,omitempty"`
	Max     string  `json:"max,omitempty"`
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
	Tenant            string                   `json:"tenant"`
	State             State                    `json:"state"`
	Paused            bool                     `json:"paused"`
	ChunksTotal       int64                    `json:"chunks_total"`
	ChunksDone        int64                    `json:"chunks_done"`
	ChunksFailed      int64                    `json:"chunks_failed"`
	ChunksSkipped     int64                    `json:"chunks_skipped"`
	Priority          int64                    `json:"priority"`
	Metadata          string                   `json:"metadata"`
	StrategicMetadata map[string]MetadataValue `json:"strategic_metadata"`
	Prefix            string                   `json:"prefix,omitempty"`
	OnFailure         json.RawMessage          `json:"on_failure"`
	NotBefore         *time.Time               `json:"not_before"`
	CreatedAt         time.Time                `json:"created_at"`
	FinishedAt        *time.Time               `json:"finished_at"`
	Failure           *Failure                 `json:"failure,omitempty"`
	// After, AfterPolicy and WaitingOn are a child's (GET /v1/submissions/{id} only): its
	// parents, its policy, and the parents not finished yet (omitted when none is).
	After       []string `json:"after,omitempty"`
	AfterPolicy string   `json:"after_policy,omitempty"`
	WaitingOn   []string `json:"waiting_on,omitempty"`
}

// Finished reports whether the submission has reached a final state.
func (s Status) Finished() bool { return s.State.Finished() }

// Failure says why a submission failed: the chunk that failed it (ChunkIndex) and its
// error; or, for a child that a parent's end cancelled, no chunk and an Error naming the
// parent ("parent 123 failed").
type Failure struct {
	ChunkIndex *int64 `json:"chunk_index,omitempty"`
	Error      string `json:"error"`
}

// String says the failure in a line's words: "chunk 3: boom", or the error alone when no
// chunk caused it ("parent 123 failed").
func (f Failure) String() string {
	if f.ChunkIndex == nil {
		return f.Error
	}
	return fmt.Sprintf("chunk %d: %s", *f.ChunkIndex, f.Error)
}

// StatusList is one page of GET /v1/submissions.
type StatusList struct {
	Submissions []Status `json:"submissions"`
	NextAfter   *string  `json:"next_after"`
}

// Result is one line of GET /v1/submissions/{id}/results: a completed chunk's output, or
// the State of a chunk that is not completed ("failed", with its last Error, "skipped" or
// "pending").
type Result struct {
	ChunkIndex int64   `json:"chunk_index"`
	Output     *string `json:"output,omitempty"`
	State      string  `json:"state,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Completed reports whether the line is a completed chunk's.
func (r Result) Completed() bool { return r.Output != nil }

// Failures is one page of GET /v1/submissions/{id}/failures.
type Failures struct {
	Failures  []FailedChunk `json:"failures"`
	NextAfter *int64        `json:"next_after"`
}

// FailedChunk is a chunk that failed at least one attempt: State "failed" (its attempts
// spent), "skipped" (its submission failed or was cancelled first), "retrying" (to be
// handed out again, or in flight) or "completed" (after failing), its Retries, its last
// Error, and its last errors (at most 5, kept across retries of the submission), newest
// first.
type FailedChunk struct {
	ChunkIndex int64          `json:"chunk_index"`
	State      string         `json:"state"`
	Retries    int64          `json:"retries"`
	Error      string         `json:"error"`
	Errors     []AttemptError `json:"errors"`
}

// AttemptError is one failed attempt's error, the consumer that reported it ("" when not
// known) and when.
type AttemptError struct {
	Error    string    `json:"error"`
	Consumer string    `json:"consumer"`
	At       time.Time `json:"at"`
}

// RetryRequest is the body of POST /v1/submissions/{id}/retry: Chunks "failed" (the
// default) or "unfinished" (the skipped ones too), or ChunkIndexes, only those chunks
// (failed or skipped; 1 to MaxRetryChunkIndexes, not with Chunks); MaxRetries, if set,
// the new budget.
type RetryRequest struct {
	Chunks       string  `json:"chunks,omitempty"`
	ChunkIndexes []int64 `json:"chunk_indexes,omitempty"`
	MaxRetries   *int    `json:"max_retries,omitempty"`
}

// MaxRetryChunkIndexes bounds RetryRequest.ChunkIndexes.
const MaxRetryChunkIndexes = 1000

// RetryManyRequest is the body of POST /v1/submissions/retry: every submission in State
// (default "failed") whose strategic metadata has Key = Value (both or neither), newest
// first, at most Limit (1 to MaxListLimit, default ListLimitDefault).
type RetryManyRequest struct {
	State      State           `json:"state,omitempty"`
	Key        string          `json:"key,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	Limit      int             `json:"limit,omitempty"`
	Chunks     string          `json:"chunks,omitempty"`
	MaxRetries *int            `json:"max_retries,omitempty"`
}

// Retried is the answer of POST /v1/submissions/retry: the ids retried.
type Retried struct {
	Retried []string `json:"retried"`
}

// Retry's chunks.
const (
	RetryFailed     = "failed"
	RetryUnfinished = "unfinished"
)

// ErrorBody is the body of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an error answer.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Consumer API.

// The headers of a request one instance forwards to another (opsqtype's).
const (
	ForwardedHeader          = opsqtype.ForwardedHeader
	ForwardedSignatureHeader = opsqtype.ForwardedSignatureHeader
	ForwardedCallerHeader    = opsqtype.ForwardedCallerHeader
	ForwardedToHeader        = opsqtype.ForwardedToHeader
	ForwardedDigestHeader    = opsqtype.ForwardedDigestHeader
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
	// Traceparent is the W3C traceparent header its submission was sent with (DESIGN.md
	// §9), for the consumer's span to join the producer's trace; absent for none.
	Traceparent string `json:"traceparent,omitempty"`
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
	// RetryAfter, a Go duration (at most 24 h), sets how long the chunk waits before it is
	// reservable again, instead of its submission's backoff.
	RetryAfter string `json:"retry_after,omitempty"`
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

// Throttle is the body of POST /v1/throttle: no chunk of a submission whose strategic
// metadata has Key = Value (Key "@tenant": of the tenant Value) is handed out for For (a
// duration, at most 1h).
type Throttle struct {
	Key   string        `json:"key"`
	Value MetadataValue `json:"value"`
	For   string        `json:"for"`
}

// Throttled is the answer to POST /v1/throttle: when the throttle ends.
type Throttled struct {
	Until time.Time `json:"until"`
}

// ThrottleLift is the body of DELETE /v1/throttle: the throttles of Key = Value end at
// once (the key and value may be sent in the query instead).
type ThrottleLift struct {
	Key   string        `json:"key"`
	Value MetadataValue `json:"value"`
}

// ThrottleLifted is the answer to DELETE /v1/throttle: how many throttles ended (one per
// tenant of a consumer confined to tenants that throttled).
type ThrottleLifted struct {
	Lifted int `json:"lifted"`
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
