package opsqtype

import "time"

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

// TokenResult is the outcome for one token of complete, fail or extend.
type TokenResult struct {
	Token     string      `json:"token"`
	Status    TokenStatus `json:"status"`
	ExpiresAt *time.Time  `json:"expires_at,omitempty"`
}
