// Package outcome records what became of the chunks handed out: completions (batched by
// the completer, one transaction for the completions of many requests), failures (a retry
// with its backoff or the chunk's failure), extends of leases (here or forwarded to the
// shard's owner), and leases that ran out (the expirer). Any instance records an outcome
// for any token it can verify; the writes are fenced by the chunk's attempt (its retries
// count) and, for an expired lease, by the claim the reservation was made under.
//
// It does not hand chunks out (queuer/internal/handout) and keeps no cache of its own: it reads the
// reservations (the reserver) and raises the changes it makes as events (notify), which
// the parts that cache chunks handle.
package outcome

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
	"opsq/queuer/startstop"
	"opsq/reserver"
	opsqsql "opsq/sql"
)

// Forwarder forwards an extend to the owner of a shard (queuer/internal/peers): the owner's answers
// in the order of tokens, none when there is no owner or it gave no answer.
type Forwarder interface {
	Extend(ctx context.Context, shard int, tokens []string, lease time.Duration) ([]opsqtype.TokenResult, error)
}

// Holds frees the max_simultaneous slots of reservations that ended (queuer/internal/handout).
type Holds interface {
	ReleaseHolds(ctx context.Context, tokens []string)
}

// Config configures a Recorder.
type Config struct {
	// ShardCount is the number of shards, as the database has it (claims.Settings,
	// fixed at the first migration). Required.
	ShardCount int
	Pool       opsqsql.Pool
	Log        *slog.Logger
	// Now tells when leases end.
	Now func() time.Time
	// Instance is this instance's id: an expired lease is recorded under its claim.
	Instance string
	Claims   *claims.Manager
	Reserver *reserver.Reserver
	Keys     *tokens.Keyring // verifies the tokens
	Router   Forwarder       // forwards extends to the shards' owners
	Holds    Holds
	Bus      *notify.Bus // hears the changes
	// Slicer moves the chunks of a large submission that a fail failed by slices; nil: a
	// fail that fails its submission moves them all in its own statement.
	Slicer Slicer
}

// Recorder records outcomes. It is safe for concurrent use. Its goroutines (the
// completer's and the expirer's) live from Start until Stop.
type Recorder struct {
	cfg        Config
	shardCount int
	completer  *completer
	expirer    *expirer
	slicing    *slicing

	failedAttempts, expired atomic.Int64
}

var _ startstop.Service = (*Recorder)(nil)

// New returns the recorder of cfg; Start it before use.
func New(cfg Config) *Recorder {
	o := &Recorder{cfg: cfg, shardCount: cfg.ShardCount}
	o.completer = newCompleter(cfg.Pool, cfg.Reserver, cfg.Bus, o.readToken)
	o.expirer = newExpirer(cfg.Reserver, cfg.Now, o.expire)
	o.slicing = &slicing{slicer: cfg.Slicer, log: cfg.Log}
	return o
}

// Start starts the completer and the expirer, and lets the slices of large failed
// submissions run.
func (o *Recorder) Start(ctx context.Context) error {
	return startstop.StartAll(ctx, []startstop.Service{o.completer, o.expirer, o.slicing})
}

// Stop stops them (the slices at their current slice). Safe twice and before Start.
func (o *Recorder) Stop() {
	startstop.StopAll([]startstop.Service{o.completer, o.expirer, o.slicing})
}

// Counts are the recorder's counters: chunks completed here, failed attempts recorded
// here (leases that ran out included), leases that ran out.
func (o *Recorder) Counts() (completed, failedAttempts, expired int64) {
	return o.completer.completed.Load(), o.failedAttempts.Load(), o.expired.Load()
}

// readToken parses and verifies a consumer's token (tokens.Keyring.Read).
func (o *Recorder) readToken(s string) (tokens.Token, bool) { return o.cfg.Keys.Read(s, o.shardCount) }
