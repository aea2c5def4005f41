// Package peers is what an instance knows of the others and how it talks to them: where
// reservable chunks are (its own shards that a full scan found empty, the tips of recent
// NOTIFYs of work, the shards the others published as available), forwarding a reserve or
// an extend to another instance with the peer client (bounded, signed with the cluster
// key), and the check of a forwarded request's signature (forwardsig.go).
//
// It does not reserve from its own shards (queuer/internal/handout) or decide when to forward (the
// queuer does: look here, then elsewhere, then wait). It hears of new and freed work from
// the events (Handle).
package peers

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"opsq/claims"
	"opsq/queuer/internal/notify"
	"opsq/queuer/internal/tokens"
	opsqsql "opsq/sql"
)

// Router owns what this instance knows of where reservable chunks are — which of its own
// shards the last full scan found empty, the tips (recent NOTIFYs of work on any shard),
// the other instances' published shards — and the HTTP client that forwards reserves and
// extends to them (forward.go). It is safe for concurrent use and has no goroutine of its
// own.
type Router struct {
	pool     opsqsql.Pool
	instance string // this instance's id, sent with every forwarded request
	log      *slog.Logger
	// now tells the ages of tips and of the peers read.
	now func() time.Time
	// claims tells which shards are this instance's.
	claims     *claims.Manager
	shardCount int
	// peerHTTP sends the requests forwarded to other instances: one per instance, so that
	// they share its connections.
	peerHTTP  *http.Client
	forwarded atomic.Int64    // reserves answered by another instance, for Counts
	outcomes  forwardOutcomes // forwarded requests by outcome, for Counts

	mu struct {
		sync.Mutex
		empty map[int]bool // own shards whose last full scan found no free chunk
		// announced counts the announcements of work on own shards (markAvailable,
		// noteWork): a scan that began before the last one does not mark shards empty.
		announced uint64
		tips      map[int]time.Time    // shards with recent NOTIFYs of new or released chunks
		peers     []peer               // other instances' published available shards
		read      time.Time            // when peers was read
		urls      map[int]string       // shard -> owner URL, from the last read
		ids       map[string]string    // peer URL -> its instance id, from the last read
		dry       map[string]time.Time // peer URL -> when it last answered a forward with nothing
	}
}

// peer is another instance as the last read of the instances has it: its URL, and the
// shards it published as having free chunks.
type peer struct {
	id, url string
	shards  []int32
}

// Config configures a Router.
type Config struct {
	// ShardCount is the number of shards, as the database has it (claims.Settings,
	// fixed at the first migration). Required.
	ShardCount int
	Pool       opsqsql.Pool
	// Instance is this instance's id, sent with every forwarded request.
	Instance string
	Log      *slog.Logger
	// Now tells the ages of tips and of the peers read. Defaults to time.Now.
	Now func() time.Time
	// Claims tells which shards are this instance's.
	Claims *claims.Manager
	// Keys signs the forwarded requests.
	Keys *tokens.Keyring
	// PeerTLS is the TLS configuration of the calls to other instances; nil uses the
	// system's roots.
	PeerTLS *tls.Config
}

var _ notify.Handler = (*Router)(nil)

// New returns the router of cfg.
func New(cfg Config) *Router {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Router{shardCount: cfg.ShardCount, pool: cfg.Pool, instance: cfg.Instance, log: cfg.Log, now: cfg.Now, claims: cfg.Claims,
		peerHTTP: newPeerHTTPClient(cfg.Keys, cfg.Instance, cfg.PeerTLS)}
	r.mu.empty = map[int]bool{}
	r.mu.tips = map[int]time.Time{}
	r.mu.dry = map[string]time.Time{}
	return r
}

// PointAt makes the next forwards go to url alone, as if url were another instance that
// published shards as available and the other instances were read just now (they are
// read again an hour later): for tests that stand a fake instance in for another.
func (r *Router) PointAt(url string, shards ...int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.peers = []peer{{id: "fake-peer", url: url, shards: shards}}
	r.mu.urls = map[int]string{}
	r.mu.ids = map[string]string{url: "fake-peer"}
	r.mu.read = r.now().Add(time.Hour)
}

// Handle notes where an event says chunks became reservable: new work (a tip for the
// shards named), chunks freed and shards acquired (own shards that may have free chunks
// again), or anywhere (notifications missed).
func (r *Router) Handle(e notify.Event) {
	switch e := e.(type) {
	case notify.NewWork:
		if !e.Local { // the NOTIFY follows, on every instance
			r.noteWork(e.Shards)
		}
	case notify.ChunksFreed:
		for _, c := range e.Chunks {
			r.markAvailable(c.Shard)
		}
	case notify.ShardsChanged:
		for _, s := range e.Acquired {
			r.markAvailable(s)
		}
	case notify.Resync:
		r.noteWork(nil)
	}
}

// markAvailable notes that an own shard may have free chunks again: acquired, or a chunk
// of it released (retried, expired).
func (r *Router) markAvailable(shard int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.mu.empty, shard)
	r.mu.announced++
}

// Announced returns the count of announcements of work, for MarkUnavailable.
func (r *Router) Announced() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.announced
}

// Available reports whether an own shard may have free chunks, for the renewal report.
func (r *Router) Available(shard int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.mu.empty[shard]
}

// MarkUnavailable notes that these shards had no free chunk at the last full scan, one
// that began when Announced returned since: when work was announced after that (the scan
// may have missed it), it notes nothing. The owner publishes it at renewal, for other
// instances' forwarding.
func (r *Router) MarkUnavailable(leases []claims.Lease, since uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.announced != since {
		return
	}
	for _, l := range leases {
		r.mu.empty[l.Shard] = true
	}
}

// OwnShardsEmpty reports whether the last full scan of every reservable shard of this
// instance found no free chunk, and no new work was announced on it since.
func (r *Router) OwnShardsEmpty() bool {
	leases := r.claims.Reservable()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range leases {
		if !r.mu.empty[l.Shard] {
			return false
		}
	}
	return true
}

// NowhereToLook reports whether a reserve would find nothing anywhere: every own shard's
// last full scan found no free chunk, and no other instance has work to forward to.
func (r *Router) NowhereToLook(ctx context.Context) bool {
	return r.OwnShardsEmpty() && len(r.forwardTargets(ctx)) == 0
}

// noteWork records an announcement of new or released chunks on shards (nil: on every
// shard, or anything may have changed): each shard named may have free chunks again, and
// is a tip for forwarding.
func (r *Router) noteWork(shards []int) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.announced++
	if shards == nil {
		clear(r.mu.empty)
		for s := range r.shardCount {
			r.mu.tips[s] = now
		}
		return
	}
	for _, s := range shards {
		delete(r.mu.empty, s)
		r.mu.tips[s] = now
	}
}
