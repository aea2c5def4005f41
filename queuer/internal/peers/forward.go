package peers

import (
	"cmp"
	"context"
	"crypto/tls"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"time"

	"opsq/claims"
	"opsq/queuer/internal/handout"
	"opsq/queuer/internal/tokens"
	opsqsql "opsq/sql"
)

// Forwarding: a consumer never waits while reservable work exists anywhere in the cluster.
// An instance with nothing for a request forwards it to instances whose shards have work:
// those named by recent NOTIFYs of new or released chunks (tips), then those whose
// owners published available shards at their last renewal.

const (
	// tipTTL is how long a NOTIFY about work on another instance's shard is believed.
	tipTTL = 5 * time.Second
	// peersTTL is how long the published availability of other instances is cached.
	peersTTL = time.Second
	// dryTTL is how long an instance that answered a forwarded reserve with nothing is
	// not forwarded to for its published availability (tips still go to it): about one
	// renewal, after which it has published what its scans found. Without it, consumers
	// that arrive together right after a start all forward to a peer whose new shards are
	// published as available until its next renewal (2 000 of 5 000 in the parked bench).
	dryTTL = 2 * time.Second
	// tipGrace is how young a tip is believed over an empty answer: the instance tipped may
	// not have seen the announcement yet (NOTIFYs reach the instances in any order, and a
	// scan it began before the commit does not see the new chunks), so its first empty
	// answer right after a tip keeps the tip and has the waiter look again soon.
	tipGrace = time.Second
	// forwardTries bounds the instances one request is forwarded to.
	forwardTries = 3
)

// The peer client's bounds (DESIGN.md §8). Forwarded reserves carry no wait (reserveBody)
// and forwarded extends are answered at once, so a whole peer call — connecting, sending,
// waiting and reading the answer — gets CallTimeout: "its own wait plus 5 s" with a
// wait of 0.
const (
	// peerConnectTimeout bounds connecting to another instance.
	peerConnectTimeout = time.Second
	// CallTimeout bounds a whole forwarded request, answer read included: a reserve
	// forwarded here must answer well inside it.
	CallTimeout = 5 * time.Second
	// peerMaxAnswerBytes bounds the answer read from another instance: the default of
	// OPSQ_MAX_RESERVE_BYTES (16 MiB), the most a reserve answer holds. A forwarded reserve
	// whose answer is larger fails, and the chunks the peer reserved for it stay reserved
	// until their lease runs out: the reserve bound must keep whole answers under this.
	peerMaxAnswerBytes = 16 << 20
)

// Forward reserves on other instances for a request this one has nothing for. retry
// reports that a peer it asked may have work that no wake-up will announce, so a waiting
// request must look again soon: the peer gave no answer (an error, a timeout),
// or it answered nothing within tipGrace of a tip to it.
func (r *Router) Forward(ctx context.Context, req handout.Request) (chunks []handout.Chunk, retry bool, err error) {
	urls := r.forwardTargets(ctx)
	for i, url := range urls {
		if i == forwardTries {
			break
		}
		chunks, err := r.reserve(ctx, r.idOf(url), url, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			r.log.Debug("forwarding a reserve", slog.String("peer", url), slog.Any("error", err))
			r.outcomes.reserveFailed.Add(1)
			retry = true
			continue
		}
		if len(chunks) > 0 {
			r.forwarded.Add(1)
			r.outcomes.reserveServed.Add(1)
			return chunks, false, nil
		}
		r.outcomes.reserveEmpty.Add(1)
		if r.answeredEmpty(url) {
			retry = true
		}
	}
	r.log.Debug("forwarded reserve found nothing", slog.String("consumer", req.Consumer),
		slog.Int("targets", len(urls)), slog.Bool("retry", retry))
	return nil, retry, nil
}

// forwardTargets lists the URLs of other instances that may have work: those the tips point
// to first, then published ones, each in random order. Every reserve that finds nothing
// here calls it, so it allocates little: no map, and this instance's shards only when
// there are tips to check against them.
func (r *Router) forwardTargets(ctx context.Context) []string {
	r.refreshPeers(ctx)
	r.mu.Lock()
	anyTips := len(r.mu.tips) > 0
	r.mu.Unlock()
	var own []claims.Lease // sorted by shard
	if anyTips {
		own = r.claims.Reservable()
	}
	isOwn := func(s int) bool {
		_, found := slices.BinarySearchFunc(own, s, func(l claims.Lease, s int) int { return cmp.Compare(l.Shard, s) })
		return found
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var tipped, published []string
	for s, at := range r.mu.tips {
		if now.Sub(at) > tipTTL {
			delete(r.mu.tips, s)
			continue
		}
		if url, ok := r.mu.urls[s]; ok && !isOwn(s) && !slices.Contains(tipped, url) {
			tipped = append(tipped, url)
		}
	}
	for _, p := range r.mu.peers {
		if dry, ok := r.mu.dry[p.url]; ok && now.Sub(dry) < dryTTL {
			continue
		}
		if len(p.shards) > 0 && !slices.Contains(tipped, p.url) && !slices.Contains(published, p.url) {
			published = append(published, p.url)
		}
	}
	rand.Shuffle(len(tipped), func(i, j int) { tipped[i], tipped[j] = tipped[j], tipped[i] })
	rand.Shuffle(len(published), func(i, j int) { published[i], published[j] = published[j], published[i] })
	return append(tipped, published...)
}

// refreshPeers rereads the other instances' shards and availability, at most every
// peersTTL.
func (r *Router) refreshPeers(ctx context.Context) {
	r.mu.Lock()
	fresh := r.now().Sub(r.mu.read) < peersTTL
	r.mu.Unlock()
	if fresh {
		return
	}
	settings := r.claims.Settings()
	rows, err := opsqsql.New(r.pool).PeersWithWork(ctx, opsqsql.PeersWithWorkParams{
		Me: r.instance, HeartbeatTimeout: settings.HeartbeatTimeout.String(),
	})
	if err != nil {
		r.log.Debug("reading peers", slog.Any("error", err))
		return
	}
	peers := make([]peer, 0, len(rows))
	urls := map[int]string{}
	ids := make(map[string]string, len(rows))
	for _, p := range rows {
		for _, s := range p.Owned {
			urls[int(s)] = p.AdvertiseURL
		}
		peers = append(peers, peer{id: p.ID, url: p.AdvertiseURL, shards: p.Available})
		ids[p.AdvertiseURL] = p.ID
	}
	r.mu.Lock()
	r.mu.peers, r.mu.urls, r.mu.ids, r.mu.read = peers, urls, ids, r.now()
	r.mu.Unlock()
}

// idOf returns the instance id of the peer at url, as the last read of the instances has
// it: the destination a forwarded request to url is signed for ("" if unknown: the peer
// refuses it).
func (r *Router) idOf(url string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.ids[url]
}

// answeredEmpty notes that url answered a forwarded reserve with nothing. Within tipGrace
// of a tip to it, it keeps the tips and reports true: url may not have seen the work yet,
// look again soon. Otherwise it forgets the tips to url, marks url dry for dryTTL, and
// reports false.
func (r *Router) answeredEmpty(url string) (lookAgain bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	for s, at := range r.mu.tips {
		if r.mu.urls[s] == url && now.Sub(at) < tipGrace {
			return true
		}
	}
	for u, at := range r.mu.dry {
		if now.Sub(at) >= dryTTL {
			delete(r.mu.dry, u) // the map holds the few peers dry now, not every one seen
		}
	}
	r.mu.dry[url] = now
	for s := range r.mu.tips {
		if r.mu.urls[s] == url {
			delete(r.mu.tips, s)
		}
	}
	return false
}

// newPeerHTTPClient returns the HTTP client of the requests forwarded to other instances,
// each signed with keys as forwarded by instance; tlsCfg (nil: the system's roots) is for
// instances that serve HTTPS.
func newPeerHTTPClient(keys *tokens.Keyring, instance string, tlsCfg *tls.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil // instances talk to each other directly, never through HTTP_PROXY
	t.DialContext = (&net.Dialer{Timeout: peerConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = peerConnectTimeout
	t.ResponseHeaderTimeout = CallTimeout
	t.MaxIdleConnsPerHost = 64 // many consumers may be forwarded to the same instance at once
	if tlsCfg != nil {
		t.TLSClientConfig = tlsCfg.Clone()
	}
	return &http.Client{
		Transport: SigningTransport(keys, instance, t),
		Timeout:   CallTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the 3xx answer itself is returned: an error
		},
	}
}
