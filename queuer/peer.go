package queuer

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/internal/peers"
	"opsq/queuer/internal/tokens"
)

// What the API and the tools see of the peer protocol: a request another instance
// forwarded here (Forwarded, VerifyForwarded in queuer.go), the instances-only give-back
// route, and a way to sign a request as an instance does.

// GiveBackPath is the route by which an instance gives back to a shard's owner the chunks
// a forwarded reserve took for a consumer that left (instances only).
const GiveBackPath = peers.GiveBackPath

// SigningTransport returns a RoundTripper that marks every request it sends as forwarded by
// instance from and signs it with the cluster keys read from pool, as an instance's peer
// client does: for tools and tests that ask one instance for its own shards only. Each
// request names the instance it is for in its ForwardedToHeader (wire.ForwardedToHeader),
// and is signed for that one alone: any other refuses it. A
// request whose context carries a caller's identity carries it, signed, in place of its
// key.
func SigningTransport(ctx context.Context, pool *pgxpool.Pool, from string, base http.RoundTripper) (http.RoundTripper, error) {
	keys := tokens.NewKeyring(pool, slog.New(slog.DiscardHandler))
	if err := keys.Load(ctx); err != nil {
		return nil, err
	}
	return peers.SigningTransport(keys, from, base), nil
}

// InstanceID returns this instance's id: the destination a request forwarded to it is
// signed for.
func (q *Queuer) InstanceID() string { return q.cfg.Instance.ID }
