package queuer

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"opsq/client"
	opsqsql "opsq/sql"
)

// Forwarding: a consumer never waits while reservable work exists anywhere in the cluster.
// An instance with nothing for a request forwards it to instances whose shards have work:
// those named by recent NOTIFYs of new or released chunks (hints), then those whose
// owners published available shards at their last renewal.

const (
	// hintTTL is how long a NOTIFY about work on another instance's shard is believed.
	hintTTL = 5 * time.Second
	// peersTTL is how long the published availability of other instances is cached.
	peersTTL = time.Second
	// forwardTries bounds the instances one request is forwarded to.
	forwardTries = 3
)

// The peer client's bounds (DESIGN.md §8). Forwarded reserves carry no wait (toWireRequest)
// and forwarded extends are answered at once, so a whole peer call — connecting, sending,
// waiting and reading the answer — gets peerCallTimeout: "its own wait plus 5 s" with a
// wait of 0.
const (
	// peerConnectTimeout bounds connecting to another instance.
	peerConnectTimeout = time.Second
	// peerCallTimeout bounds a whole forwarded request, answer read included.
	peerCallTimeout = 5 * time.Second
	// peerMaxAnswerBytes bounds the answer read from another instance: the default of
	// OPSQ_MAX_RESERVE_BYTES (16 MiB), the most a reserve answer holds. A forwarded reserve
	// whose answer is larger fails, and the chunks the peer reserved for it stay reserved
	// until their lease runs out: the reserve bound must keep whole answers under this.
	peerMaxAnswerBytes = 16 << 20
)

// availability is what this instance knows of where reservable chunks are.
type availability struct {
	mu struct {
		sync.Mutex
		empty map[int]bool // own shards whose last full scan found no free chunk
		// announced counts the announcements of work on own shards (markAvailable, onWork):
		// a scan that began before the last one does not mark shards empty.
		announced uint64
		hints     map[int]time.Time // shards with recent NOTIFYs of new or released chunks
		peers     []peer            // other instances' published available shards
		read      time.Time         // when peers was read
		urls      map[int]string    // shard -> owner URL, from the last read
	}
	// peerHTTP sends the requests forwarded to other instances: one per Queuer, so that
	// they share its connections.
	peerHTTP *http.Client
}

type peer struct {
	id, url string
	shards  []int32
}

func newAvailability() *availability {
	a := &availability{peerHTTP: newPeerHTTPClient()}
	a.mu.empty = map[int]bool{}
	a.mu.hints = map[int]time.Time{}
	return a
}

// markAvailable notes that an own shard may have free chunks again: acquired, or a chunk
// of it released (retried, expired).
func (q *Queuer) markAvailable(shard int) {
	q.hints.clear()
	q.avail.mu.Lock()
	defer q.avail.mu.Unlock()
	delete(q.avail.mu.empty, shard)
	q.avail.mu.announced++
}

// announced returns the count of announcements of work, for markUnavailable.
func (q *Queuer) announced() uint64 {
	q.avail.mu.Lock()
	defer q.avail.mu.Unlock()
	return q.avail.mu.announced
}

// available reports whether an own shard may have free chunks, for the renewal report.
func (q *Queuer) available(shard int) bool {
	q.avail.mu.Lock()
	defer q.avail.mu.Unlock()
	return !q.avail.mu.empty[shard]
}

// onWork handles a NOTIFY of new or released chunks (workPayload): "all:N" (N chunks over
// every shard), "3,17" (a chunk on each shard named), or "all" (anything may have
// changed). It wakes as many waiting reserves as there are new chunks, wherever they are:
// a waiter here takes those of this instance's shards and forwards for the others'.
func (q *Queuer) onWork(payload string) {
	now := time.Now()
	n := -1 // all
	q.avail.mu.Lock()
	q.avail.mu.announced++
	if rest, ok := strings.CutPrefix(payload, "all"); ok {
		if c, err := strconv.Atoi(strings.TrimPrefix(rest, ":")); err == nil && c >= 0 {
			n = c
		}
		clear(q.avail.mu.empty)
		for s := range q.shardCount {
			q.avail.mu.hints[s] = now
		}
	} else {
		n = 0
		for _, f := range strings.Split(payload, ",") {
			if s, err := strconv.Atoi(f); err == nil {
				delete(q.avail.mu.empty, s)
				q.avail.mu.hints[s] = now
				n++
			}
		}
	}
	q.avail.mu.Unlock()
	q.hints.clearNewWork()
	if n < 0 {
		q.work.broadcast()
	} else {
		q.work.wake(n)
	}
}

// forward reserves on other instances for a request this one has nothing for. failed
// reports that a peer it asked gave no answer (an error, a timeout): that peer may have
// work, and no wake-up will say so, so a waiting request must look again (Reserve).
func (q *Queuer) forward(ctx context.Context, req ReserveRequest) (chunks []Chunk, failed bool, err error) {
	urls := q.forwardTargets(ctx)
	for i, url := range urls {
		if i == forwardTries {
			break
		}
		chunks, err := q.peer(url).Reserve(ctx, toWireRequest(req))
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			q.log.Debug("forwarding a reserve", slog.String("peer", url), slog.Any("error", err))
			failed = true
			continue
		}
		if len(chunks) > 0 {
			q.count.forwarded.Add(1)
			return fromWire(chunks), false, nil
		}
		q.forgetHints(url) // it had nothing: the hints about it are stale
	}
	q.log.Debug("forwarded reserve found nothing", slog.String("consumer", req.Consumer),
		slog.Int("targets", len(urls)), slog.Bool("failed", failed))
	return nil, failed, nil
}

// forwardTargets lists the URLs of other instances that may have work: hinted ones first,
// then published ones, each in random order.
func (q *Queuer) forwardTargets(ctx context.Context) []string {
	q.refreshPeers(ctx)
	own := map[int]bool{}
	for _, l := range q.claims.Reservable() {
		own[l.Shard] = true
	}
	now := time.Now()
	q.avail.mu.Lock()
	defer q.avail.mu.Unlock()
	seen := map[string]bool{}
	var hinted, published []string
	for s, at := range q.avail.mu.hints {
		if now.Sub(at) > hintTTL {
			delete(q.avail.mu.hints, s)
			continue
		}
		if url, ok := q.avail.mu.urls[s]; ok && !own[s] && !seen[url] {
			seen[url] = true
			hinted = append(hinted, url)
		}
	}
	for _, p := range q.avail.mu.peers {
		if !seen[p.url] && len(p.shards) > 0 {
			seen[p.url] = true
			published = append(published, p.url)
		}
	}
	rand.Shuffle(len(hinted), func(i, j int) { hinted[i], hinted[j] = hinted[j], hinted[i] })
	rand.Shuffle(len(published), func(i, j int) { published[i], published[j] = published[j], published[i] })
	return append(hinted, published...)
}

// refreshPeers rereads the other instances' shards and availability, at most every
// peersTTL.
func (q *Queuer) refreshPeers(ctx context.Context) {
	q.avail.mu.Lock()
	fresh := time.Since(q.avail.mu.read) < peersTTL
	q.avail.mu.Unlock()
	if fresh {
		return
	}
	settings := q.claims.Settings()
	rows, err := q.pool.Query(ctx, opsqsql.PeersWithWork, pgx.NamedArgs{
		"me": q.cfg.Instance.ID, "heartbeat_timeout": settings.HeartbeatTimeout.String(),
	})
	if err != nil {
		q.log.Debug("reading peers", slog.Any("error", err))
		return
	}
	var peers []peer
	urls := map[int]string{}
	var p peer
	var owned []int32
	_, err = pgx.ForEachRow(rows, []any{&p.id, &p.url, &owned, &p.shards}, func() error {
		for _, s := range owned {
			urls[int(s)] = p.url
		}
		peers = append(peers, peer{id: p.id, url: p.url, shards: append([]int32(nil), p.shards...)})
		return nil
	})
	if err != nil {
		q.log.Debug("reading peers", slog.Any("error", err))
		return
	}
	q.avail.mu.Lock()
	q.avail.mu.peers, q.avail.mu.urls, q.avail.mu.read = peers, urls, time.Now()
	q.avail.mu.Unlock()
}

// forgetHints drops the hints about the shards of url.
func (q *Queuer) forgetHints(url string) {
	q.avail.mu.Lock()
	defer q.avail.mu.Unlock()
	for s := range q.avail.mu.hints {
		if q.avail.mu.urls[s] == url {
			delete(q.avail.mu.hints, s)
		}
	}
}

// peer returns a client for another instance that marks its requests as forwarded. It
// has the bounds of DESIGN.md §8: peerConnectTimeout, peerCallTimeout, no redirect
// followed (a redirect is an error), at most peerMaxAnswerBytes of an answer read.
func (q *Queuer) peer(url string) *client.Client {
	return client.New(url, client.WithHTTPClient(q.avail.peerHTTP), client.WithMaxResponseBytes(peerMaxAnswerBytes),
		client.WithHeader(client.ForwardedHeader, q.cfg.Instance.ID))
}

// newPeerHTTPClient returns the HTTP client of the requests forwarded to other instances.
func newPeerHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // instances talk to each other directly, never through HTTP_PROXY
	t.DialContext = (&net.Dialer{Timeout: peerConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = peerConnectTimeout
	t.ResponseHeaderTimeout = peerCallTimeout
	t.MaxIdleConnsPerHost = 64 // many consumers may be forwarded to the same instance at once
	return &http.Client{
		Transport: t,
		Timeout:   peerCallTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the 3xx answer itself is returned: an error
		},
	}
}

func toWireRequest(req ReserveRequest) client.ReserveRequest {
	strat, _ := json.Marshal(req.Strategy) // a valid tree always marshals
	return client.ReserveRequest{
		Max: req.Max, Strategy: strat, Lease: req.Lease.String(), Consumer: req.Consumer,
	}
}

func fromWire(chunks []client.ReservedChunk) []Chunk {
	out := make([]Chunk, len(chunks))
	for i, c := range chunks {
		id, _ := strconv.ParseInt(c.SubmissionID, 10, 64)
		strategic, _ := json.Marshal(c.StrategicMetadata)
		out[i] = Chunk{
			Token: c.Token, SubmissionID: id, ChunkIndex: int32(c.ChunkIndex), Prefix: c.Prefix,
			Metadata: c.Metadata, StrategicMetadata: strategic, Retries: int32(c.Retries), ExpiresAt: c.ExpiresAt,
		}
		if c.Input != nil {
			out[i].Input = []byte(*c.Input)
		}
	}
	return out
}
