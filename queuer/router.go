package queuer

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/claims"
)

// router owns what this instance knows of where reservable chunks are — which of its own
// shards the last full scan found empty, the tips (recent NOTIFYs of work on any shard),
// the other instances' published shards — and the HTTP client that forwards reserves and
// extends to them (forward.go). It is safe for concurrent use and has no goroutine of its
// own.
type router struct {
	pool     *pgxpool.Pool
	instance string // this instance's id, sent with every forwarded request
	log      *slog.Logger
	// clock tells the ages of tips and of the peers read (now); set once, before the
	// queuer starts. nil is the system's.
	clock Clock
	// claims tells which shards are this instance's; set once, before the queuer starts.
	claims *claims.Manager
	// peerHTTP sends the requests forwarded to other instances: one per Queuer, so that
	// they share its connections.
	peerHTTP  *http.Client
	forwarded atomic.Int64    // reserves answered by another instance, for Stats
	outcomes  forwardOutcomes // forwarded requests by outcome, for Metrics (metrics.go)

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
		dry       map[string]time.Time // peer URL -> when it last answered a forward with nothing
	}
}

// peer is another instance as the last read of the instances has it: its URL, and the
// shards it published as having free chunks.
type peer struct {
	id, url string
	shards  []int32
}

func newRouter(pool *pgxpool.Pool, instance string, keys *Keyring, peerTLS *tls.Config, log *slog.Logger) *router {
	r := &router{pool: pool, instance: instance, log: log, peerHTTP: newPeerHTTPClient(keys, instance, peerTLS)}
	r.mu.empty = map[int]bool{}
	r.mu.tips = map[int]time.Time{}
	r.mu.dry = map[string]time.Time{}
	return r
}

// now is the time on the router's clock.
func (r *router) now() time.Time {
	if r.clock == nil {
		return time.Now()
	}
	return r.clock.Now()
}

// markAvailable notes that an own shard may have free chunks again: acquired, or a chunk
// of it released (retried, expired).
func (r *router) markAvailable(shard int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.mu.empty, shard)
	r.mu.announced++
}

// announced returns the count of announcements of work, for markUnavailable.
func (r *router) announced() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.announced
}

// available reports whether an own shard may have free chunks, for the renewal report.
func (r *router) available(shard int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.mu.empty[shard]
}

// markUnavailable notes that these shards had no free chunk at the last full scan, one
// that began when announced returned since: when work was announced after that (the scan
// may have missed it), it notes nothing. The owner publishes it at renewal, for other
// instances' forwarding.
func (r *router) markUnavailable(leases []claims.Lease, since uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.announced != since {
		return
	}
	for _, l := range leases {
		r.mu.empty[l.Shard] = true
	}
}

// ownShardsEmpty reports whether the last full scan of every reservable shard of this
// instance found no free chunk, and no new work was announced on it since.
func (r *router) ownShardsEmpty() bool {
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

// nowhereToLook reports whether a reserve would find nothing anywhere: every own shard's
// last full scan found no free chunk, and no other instance has work to forward to.
func (r *router) nowhereToLook(ctx context.Context) bool {
	return r.ownShardsEmpty() && len(r.forwardTargets(ctx)) == 0
}

// noteWork records a NOTIFY of new or released chunks (workPayload) over shardCount
// shards: "all:N" (N chunks over every shard), "3,17" (a chunk on each shard named), or
// "all" (anything may have changed). Each shard named may have free chunks again, and is
// a tip for forwarding. It returns how many chunks the NOTIFY announces, -1 for any
// number.
func (r *router) noteWork(payload string, shardCount int) int {
	now := r.now()
	n := -1 // all
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.announced++
	if rest, ok := strings.CutPrefix(payload, "all"); ok {
		if c, err := strconv.Atoi(strings.TrimPrefix(rest, ":")); err == nil && c >= 0 {
			n = c
		}
		clear(r.mu.empty)
		for s := range shardCount {
			r.mu.tips[s] = now
		}
		return n
	}
	n = 0
	for _, f := range strings.Split(payload, ",") {
		if s, err := strconv.Atoi(f); err == nil {
			delete(r.mu.empty, s)
			r.mu.tips[s] = now
			n++
		}
	}
	return n
}
