package wire

import "time"

// Bounds and defaults of the requests of REST API v1 (DESIGN.md §3), written once: the
// server refuses a request past them with a 400 that names the field, and clients such as
// "opsq work" and "opsq list" check them first, so that a typo is a usage error.
const (
	// MaxReserveChunks is the most chunks one reserve may ask for ("max": 1 to this).
	MaxReserveChunks = 10_000
	// MaxRequestItems is the most completions, failures or tokens one complete, fail or
	// extend may carry.
	MaxRequestItems = 10_000
	// LeaseDefault is the lease of a reserve or extend that names none.
	LeaseDefault = 5 * time.Minute
	// MinLease and MaxLease bound the lease of a reserve or extend.
	MinLease = time.Second
	MaxLease = 24 * time.Hour
	// MaxWait bounds the long-poll of a reserve ("wait") and of a submission's status
	// ("?wait="); the least is 0, which answers at once.
	MaxWait = 60 * time.Second
	// ListLimitDefault and MaxListLimit are the default and the most of a page of
	// GET /v1/submissions ("limit": 1 to MaxListLimit).
	ListLimitDefault = 100
	MaxListLimit     = 1000
	// MaxBackoff bounds a submission's retry_backoff.initial and retry_backoff.max, and a
	// fail's retry_after.
	MaxBackoff = 24 * time.Hour
	// MinThrottle and MaxThrottle bound a throttle's "for" (POST /v1/throttle).
	MinThrottle = time.Second
	MaxThrottle = time.Hour
)

// TenantKey is the strategy and throttle key that stands for a submission's tenant.
const TenantKey = "@tenant"
