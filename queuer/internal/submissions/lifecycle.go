package submissions

import (
	"encoding/json"
	"errors"
	"time"

	"opsq/queuer/opsqtype"
	opsqsql "opsq/sql"
)

// What a submission does when work goes wrong, and when its work may start (DESIGN.md §3,
// the lifecycle fields).

// Bounds and defaults of the lifecycle fields.
const (
	BackoffInitialDefault = time.Second
	BackoffFactorDefault  = 2.0
	BackoffMaxDefault     = time.Minute
	// NotBeforeMax bounds how far ahead not_before may be.
	NotBeforeMax = 30 * 24 * time.Hour
	// ErrorMax is how much of one failed attempt's error is kept (opsqtype.ErrorMax).
	ErrorMax = opsqtype.ErrorMax
	// ErrorsKept is how many errors of each chunk are kept, the newest.
	ErrorsKept = 5
	// FailuresPageMax bounds a page of Failures, and RetryManyMax the submissions of one
	// RetryMany.
	FailuresPageMax = 1000
	RetryManyMax    = 1000
	// FailuresPageBytesMax bounds a page of Failures in bytes, as JSON writes it (each
	// string up to six times its bytes, escaped): the page stops adding chunks before it
	// would pass it (it holds at least one), and more follow. Five errors of ErrorMax bytes
	// can take about 300 KB of JSON per chunk: FailuresPageMax of them, 300 MB.
	FailuresPageBytesMax = 4 << 20
)

// failuresPageOverhead is what a page of Failures takes besides its chunks, as an answer
// writes it: the field names, next_after and the punctuation.
const failuresPageOverhead = 64

// Lifecycle is a submission's lifecycle settings; its zero value is the default: fail the
// submission at its first failed chunk, the default backoff, no not_before.
type Lifecycle struct {
	// OnFailure is the policy as the producer gave it (JSON), echoed in the status; nil is
	// "fail_submission".
	OnFailure json.RawMessage
	Policy    FailurePolicy
	Backoff   Backoff
	// NotBefore: nothing of the submission is handed out before then; zero for none.
	NotBefore time.Time
}

// FailurePolicy decides what a chunk whose attempts are spent does to its submission: with
// Continue, nothing (the others go on); with AfterChunks or AfterFraction, the submission
// fails once more than that many chunks, or that fraction of chunks_total, have failed;
// with none of them set (the zero value), at the first.
type FailurePolicy struct {
	Continue      bool
	AfterChunks   *int64
	AfterFraction *float64
}

// maxFailed is how many chunks of total may fail before the submission fails; nil: any.
func (p FailurePolicy) maxFailed(total int64) *int64 {
	var n int64
	switch {
	case p.Continue:
		return nil
	case p.AfterChunks != nil:
		n = *p.AfterChunks
	case p.AfterFraction != nil:
		n = int64(*p.AfterFraction * float64(total))
	}
	return &n
}

// params are l's row of submission_lifecycle for submission id of total chunks, and
// whether it needs one: the defaults need none.
func (l Lifecycle) params(id, total int64) (opsqsql.SubmissionLifecycleInsertParams, bool) {
	if l.OnFailure == nil && l.Policy == (FailurePolicy{}) && l.Backoff == (Backoff{}) && l.NotBefore.IsZero() {
		return opsqsql.SubmissionLifecycleInsertParams{}, false
	}
	p := opsqsql.SubmissionLifecycleInsertParams{
		ID: id, OnFailure: l.OnFailure, MaxFailed: l.Policy.maxFailed(total),
		BackoffInitial: BackoffInitialDefault, BackoffFactor: BackoffFactorDefault, BackoffMax: BackoffMaxDefault,
	}
	if l.Backoff != (Backoff{}) {
		p.BackoffInitial, p.BackoffFactor, p.BackoffMax = l.Backoff.Initial, l.Backoff.Factor, l.Backoff.Max
	}
	if p.OnFailure == nil {
		p.OnFailure = json.RawMessage(`"fail_submission"`)
	}
	if !l.NotBefore.IsZero() {
		p.NotBefore = &l.NotBefore
	}
	return p, true
}

// Backoff is how long a retried chunk waits before it is reservable again: Initial ×
// Factor^(retries−1), at most Max, ±20 % jitter. Its zero value is the defaults (1 s, 2,
// 1 min); any other value is taken as it is, every field (an Initial of 0 retries at
// once): the api fills in the defaults of the fields a producer leaves out.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Max     time.Duration
}

// RetryOptions are a retry's: Unfinished retries the skipped chunks too; MaxRetries, if set,
// replaces the submission's attempt budget.
type RetryOptions struct {
	Unfinished bool
	MaxRetries *int
	// ChunkIndexes, when not nil, retries only those chunks of the submission, each if it
	// failed or was skipped (Unfinished aside); the others stay as they are. At most
	// RetryChunksMax.
	ChunkIndexes []int32
}

// RetryChunksMax bounds RetryOptions.ChunkIndexes.
const RetryChunksMax = 1000

// ErrRetriedWhileCancelled: a retry made the submission in progress again while its
// cancel moved its chunks by slices, before the cancel answered: the retry won.
var ErrRetriedWhileCancelled = errors.New("retried before its cancel finished: in progress again")

// ErrNothingToRetry: the submission has no failed chunk (nor skipped one, for Unfinished),
// or it was cancelled and only its failed chunks were asked for.
var ErrNothingToRetry = errors.New("nothing to retry")

// FailedChunk is a chunk that failed at least one attempt (Failures).
type FailedChunk struct {
	ChunkIndex int64
	// State is one of FailedChunkFailed, Skipped, Retrying and Completed.
	State   string
	Retries int64
	// Errors are its last errors, newest first (at most ErrorsKept).
	Errors []AttemptError
}

// AttemptError is one failed attempt's error.
type AttemptError struct {
	Error    string
	Consumer string
	At       time.Time
}

// Result is one chunk's line of a submission's results (Results): State is "completed"
// (with its Output), "failed" (with the last Error), "skipped" or "pending".
type Result struct {
	ChunkIndex int64
	State      string
	Output     []byte
	Error      string
}

// Result states.
const (
	ResultCompleted = "completed"
	ResultFailed    = "failed"
	ResultSkipped   = "skipped"
	ResultPending   = "pending"
)
