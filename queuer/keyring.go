package queuer

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	opsqsql "opsq/sql"
)

// ChannelClusterKeys is notified by sql/admin/rotate_cluster_key.sql: the instances reload
// the cluster keys at once instead of at their next refresh.
const ChannelClusterKeys = "opsq_cluster_keys"

// KeyOverlap is how long a cluster key keeps verifying after the next newer key was
// created: the longest lease (24 h), so that every reservation signed before a rotation
// can still be completed, failed or extended, plus the time an instance may take to sign
// with the new key (KeyRefreshInterval, with a margin), during which it still hands out
// tokens signed with the old one.
//
// The rule, for the README: the newest key (highest id) signs; a key verifies while it is
// the newest, or until 24 h 1 min after the next newer key was created. A reservation kept
// alive by extends for more than 24 h across a rotation becomes "unknown".
const KeyOverlap = 24*time.Hour + time.Minute

// KeyRefreshInterval is how often an instance reloads the cluster keys, in case it missed
// the NOTIFY of a rotation.
const KeyRefreshInterval = 30 * time.Second

// MACLen is the length of a MAC made by Keyring.Sign: HMAC-SHA256 truncated to 16 bytes.
const MACLen = 16

// keySecretMin is the shortest secret a key may have.
const keySecretMin = 16

var errNoClusterKey = errors.New(`queuer: no cluster key in opsq.cluster_keys to sign tokens with: run "opsq migrate up" (migration 00004 creates the first key), or add one with sql/admin/rotate_cluster_key.sql`)

// secret is a key's secret bytes. It prints as "[secret]", with any verb, so that no log
// shows it; so do the clusterKey and the Keyring that hold secrets (fmt reads unexported
// fields without calling their methods).
type secret []byte

func (secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "[secret]") }
func (secret) LogValue() slog.Value       { return slog.StringValue("[secret]") }

// clusterKey is one row of opsq.cluster_keys.
type clusterKey struct {
	id     int
	secret secret
	// until is when the key stops verifying; zero for the newest key.
	until time.Time
}

// Keyring holds the cluster keys (opsq.cluster_keys): it signs with the newest and
// verifies with any that is still valid (see KeyOverlap). Load reads the keys; Start
// keeps them fresh (every KeyRefreshInterval, and at once after Refresh) from Start until
// its context ends, and Stop waits for that goroutine. It is safe for concurrent use.
type Keyring struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	wake chan struct{}
	done chan struct{}

	mu struct {
		sync.RWMutex
		keys   map[int]clusterKey
		newest int
	}
}

// NewKeyring returns an empty keyring reading the keys from pool; Load it before use.
func NewKeyring(pool *pgxpool.Pool, log *slog.Logger) *Keyring {
	return &Keyring{pool: pool, log: log, wake: make(chan struct{}, 1)}
}

// Load reads the keys that still verify. It fails when there is none, or when one is too
// short to be a secret; the keys held before stay then.
func (k *Keyring) Load(ctx context.Context) error {
	rows, err := k.pool.Query(ctx, opsqsql.ClusterKeysLoad, pgx.NamedArgs{"overlap_us": KeyOverlap.Microseconds()})
	if err != nil {
		return fmt.Errorf("reading opsq.cluster_keys: %w", err)
	}
	now := time.Now()
	keys := map[int]clusterKey{}
	newest := 0
	var id int
	var s []byte
	var left *int64
	_, err = pgx.ForEachRow(rows, []any{&id, &s, &left}, func() error {
		if len(s) < keySecretMin {
			return fmt.Errorf("cluster key %d has a secret of %d bytes; want at least %d", id, len(s), keySecretMin)
		}
		ck := clusterKey{id: id, secret: secret(s)}
		if left != nil {
			ck.until = now.Add(time.Duration(*left) * time.Microsecond)
		}
		keys[id] = ck
		newest = max(newest, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading opsq.cluster_keys: %w", err)
	}
	if len(keys) == 0 {
		return errNoClusterKey
	}
	k.mu.Lock()
	k.mu.keys, k.mu.newest = keys, newest
	k.mu.Unlock()
	return nil
}

// Start reloads the keys every KeyRefreshInterval, and soon after each Refresh, until ctx
// ends. A failed reload keeps the keys held and is logged.
func (k *Keyring) Start(ctx context.Context) {
	k.done = make(chan struct{})
	go func() {
		defer close(k.done)
		tick := time.NewTicker(KeyRefreshInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-k.wake:
			}
			if err := k.Load(ctx); err != nil && ctx.Err() == nil {
				k.log.Error("reloading the cluster keys; keeping the ones held", slog.Any("error", err))
			}
		}
	}()
}

// Stop waits for the goroutine of Start, whose context must have ended. Safe twice and
// before Start.
func (k *Keyring) Stop() {
	if k.done != nil {
		<-k.done
	}
}

// Refresh asks the goroutine of Start to reload the keys now (a rotation was announced).
func (k *Keyring) Refresh() {
	select {
	case k.wake <- struct{}{}:
	default: // a reload is pending already
	}
}

// Sign returns the id of the newest key and the MAC (MACLen bytes) of msg under it. A
// caller signing several kinds of message starts each msg with its own label, so that a
// MAC made for one kind never verifies as another.
func (k *Keyring) Sign(msg []byte) (keyID int, mac []byte) {
	key := k.newestKey()
	return key.id, macOf(key.secret, msg)
}

// newestKey is the key that signs.
func (k *Keyring) newestKey() clusterKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.mu.keys[k.mu.newest]
}

// Verify reports whether mac is the MAC of msg under key keyID, and that key still
// verifies (it is the newest, or KeyOverlap has not passed since its successor was made).
func (k *Keyring) Verify(keyID int, msg, mac []byte) bool {
	k.mu.RLock()
	key, ok := k.mu.keys[keyID]
	newest := keyID == k.mu.newest
	k.mu.RUnlock()
	if !ok || len(mac) != MACLen || !newest && !time.Now().Before(key.until) {
		return false
	}
	return hmac.Equal(mac, macOf(key.secret, msg))
}

// LogValue shows the key ids only.
func (k *Keyring) LogValue() slog.Value {
	k.mu.RLock()
	defer k.mu.RUnlock()
	ids := make([]int, 0, len(k.mu.keys))
	for id := range k.mu.keys {
		ids = append(ids, id)
	}
	return slog.GroupValue(slog.Any("ids", ids), slog.Int("signing", k.mu.newest))
}

// Format prints the key id only.
func (ck clusterKey) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "cluster key %d", ck.id) }

// LogValue shows the key id only.
func (ck clusterKey) LogValue() slog.Value { return slog.IntValue(ck.id) }

// Format prints the key ids only.
func (k *Keyring) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "cluster keys %v", k.LogValue())
}

func macOf(s secret, msg []byte) []byte {
	h := hmac.New(sha256.New, s)
	h.Write(msg)
	return h.Sum(nil)[:MACLen]
}
