package queuer

import (
	"opsq/queuer/internal/admin"
	"opsq/queuer/internal/handout"
	"opsq/queuer/internal/outcome"
	"opsq/queuer/internal/peers"
	"opsq/queuer/internal/submissions"
	"opsq/queuer/internal/throttles"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/internal/waiters"
	opsqsql "opsq/sql"
)

// The engine's words as its callers (the api, the dashboard, the CLI and the bench) use
// them; each is its part's. The façade is their one door: nothing outside queuer imports a
// part.
type (
	NewSubmission = submissions.NewSubmission
	Chunks        = submissions.Chunks
	Created       = submissions.Created
	Status        = submissions.Status
	ListOptions   = submissions.ListOptions
	Lifecycle     = submissions.Lifecycle
	FailurePolicy = submissions.FailurePolicy
	Backoff       = submissions.Backoff
	Result        = submissions.Result
	FailedChunk   = submissions.FailedChunk
	AttemptError  = submissions.AttemptError
	ChunkInfo     = submissions.ChunkInfo
	RetryOptions  = submissions.RetryOptions
	// Dependencies is what a child's status adds; ParentError a parent it may not have.
	Dependencies = submissions.Dependencies
	ParentError  = submissions.ParentError
	// SmallSubmission is one row of SubmitMany.
	SmallSubmission = submissions.SmallSubmission

	Minute     = admin.Minute
	Consumer   = admin.Consumer
	ValueRate  = admin.ValueRate
	RateBucket = admin.RateBucket
	Throttle   = throttles.Throttle

	ReserveRequest = handout.Request
	Chunk          = handout.Chunk
	// Forwarded is what marks and signs a request another instance forwarded here.
	Forwarded    = peers.Forwarded
	PreviewChunk = handout.PreviewChunk
	Completion   = outcome.Completion
	Failure      = outcome.Failure
	Extended     = outcome.Extended
)

// Bounds and defaults of what a submission carries, which the API checks before the
// engine sees a request.
const (
	BackoffInitialDefault = submissions.BackoffInitialDefault
	BackoffFactorDefault  = submissions.BackoffFactorDefault
	BackoffMaxDefault     = submissions.BackoffMaxDefault
	NotBeforeMax          = submissions.NotBeforeMax
	ErrorMax              = submissions.ErrorMax
	FailuresPageMax       = submissions.FailuresPageMax
	// ChunkPreviewMax is how much of a chunk's input and output Chunk reads.
	ChunkPreviewMax = submissions.ChunkPreviewMax
	// The phases of an in-progress submission, which ListOptions.Phase selects.
	PhaseRunning   = submissions.PhaseRunning
	PhasePaused    = submissions.PhasePaused
	PhaseScheduled = submissions.PhaseScheduled
	// FailuresPageBytesMax bounds a page of Failures in bytes, as JSON writes it.
	FailuresPageBytesMax = submissions.FailuresPageBytesMax
	RetryManyMax         = submissions.RetryManyMax
	RetryChunksMax       = submissions.RetryChunksMax
	// A child's policies (NewSubmission.AfterPolicy), and its bound of parents.
	AfterCompleted = submissions.AfterCompleted
	AfterFinished  = submissions.AfterFinished
	MaxParents     = submissions.MaxParents
	// TenantKey is the pseudo-key of a submission's tenant in strategies and throttles.
	TenantKey = submissions.TenantKey
	// FailedChunkFailed is the state of a chunk whose attempts are spent, in Failures.
	FailedChunkFailed = submissions.FailedChunkFailed
	// ResultCompleted is the state of a completed chunk's result.
	ResultCompleted = submissions.ResultCompleted
	// RateBucketsShown is how many buckets RateBuckets returns at most.
	RateBucketsShown = admin.RateBucketsShown
	// TokenMACLen is how many bytes of a reservation token are its signature.
	TokenMACLen = tokens.MACLen
)

// CheckTenant checks a tenant's name (1–64 bytes of a-z 0-9 _ -).
func CheckTenant(name string) error { return submissions.CheckTenant(name) }

// TokenClaim returns the shard and the claim generation a token was issued under, read by
// the engine's own parser (to consumers a token is opaque; the tests read it to check
// fencing).
func TokenClaim(tok string) (shard int, generation int64, err error) { return tokens.Claim(tok) }

// Errors that callers branch on.
var (
	// ErrNotFound: no submission has this id (or it was deleted by retention).
	ErrNotFound = submissions.ErrNotFound
	// ErrFinished: the submission is already completed, failed or cancelled.
	ErrFinished = submissions.ErrFinished
	// ErrNotCompleted: results exist only for completed submissions.
	ErrNotCompleted = submissions.ErrNotCompleted
	// ErrNothingToRetry: a retry found no failed (or skipped) chunk to retry.
	ErrNothingToRetry = submissions.ErrNothingToRetry
	// ErrRetriedWhileCancelled: a retry made the submission in progress again before its
	// cancel had moved all its chunks; the retry won, the submission is in progress.
	ErrRetriedWhileCancelled = submissions.ErrRetriedWhileCancelled
	// ErrReserveTimeout: a reserve's candidate reads ran past their bound (the database is
	// slow, or the strategy reads far); retry later.
	ErrReserveTimeout = handout.ErrRunTimeout
	// ErrTooManyWaiters: Config.MaxWaiters requests already wait on this instance.
	ErrTooManyWaiters = waiters.ErrTooMany
	// ErrTooManyWaitersForKey: the caller's key holds its share of them
	// (Config.MaxWaitersPerKey); it wraps ErrTooManyWaiters.
	ErrTooManyWaitersForKey = waiters.ErrTooManyForKey
	// ErrNoSuchTarget: the instance or shard an administrative action names does not exist.
	ErrNoSuchTarget = admin.ErrNoSuchTarget
	// ErrForwardedSignature: a request marked forwarded has no valid signature.
	ErrForwardedSignature = peers.ErrForwardedSignature
	// ErrUnavailable means the database cannot be reached now (it is down, restarting, or
	// refusing connections): the request may succeed if retried a little later. The API
	// answers 503 with Retry-After, never 500 (DESIGN.md §3). It is package sql's, where
	// the database's errors are translated once (sql/errors.go).
	ErrUnavailable = opsqsql.ErrUnavailable
)

// IsUnavailable reports whether err means that the database cannot be reached now: it is
// sql.IsUnavailable, which recognizes driver errors wherever they come from, so that no
// call site has to translate them.
func IsUnavailable(err error) bool { return opsqsql.IsUnavailable(err) }
