package tokens

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// The rotation rule (DESIGN.md §8; README-ready):
//
//   - Every key verifies from the moment an instance has loaded it. A new key (the highest
//     id) signs only once it is KeyActivation old, by which time every instance has loaded
//     it (they reload every KeyRefreshInterval, and at once on the rotation's NOTIFY), so
//     that no instance meets a token signed by a key it does not know yet. Until then the
//     previous key signs. (A database whose every key is younger, just migrated or after a
//     leaked key was deleted, signs with its newest key at once.)
//   - An older key keeps verifying until KeyOverlap after the next newer key was created:
//     the longest lease (24 h), so that a reservation made just before the newer key signs
//     can be completed, failed and extended for its whole lease, plus KeyActivation and a
//     minute of margin. Then it is refused. A reservation kept alive by extends for more
//     than 24 h across a rotation answers "unknown" afterwards.

// KeyActivation is how old a key must be before it signs: twice KeyRefreshInterval.
const KeyActivation = 2 * KeyRefreshInterval

// KeyOverlap is how long a key keeps verifying after the next newer key was created: the
// longest lease, plus KeyActivation, plus a minute of margin: 24 h 2 min.
const KeyOverlap = 24*time.Hour + KeyActivation + time.Minute

// KeyRefreshInterval is how often an instance reloads the cluster keys, in case it missed
// the NOTIFY of a rotation.
const KeyRefreshInterval = 30 * time.Second

// MACLen is the length of a MAC made under a cluster Key: HMAC-SHA256 truncated to 16 bytes.
const MACLen = 16

// keySecretMin is the shortest secret a key may have.
const keySecretMin = 16

var errNoClusterKey = errors.New(`no cluster key in opsq.cluster_keys to sign tokens with: run "opsq migrate up" (migration 00004 creates the first key), or add one with sql/admin/rotate_cluster_key.sql`)

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
	// signsFrom is when the key is KeyActivation old (by this instance's clock).
	signsFrom time.Time
	// until is when the key stops verifying; zero for the newest key, which stays.
	until time.Time
}

// Keyring holds the cluster keys (opsq.cluster_keys): it signs with the newest key that is
// KeyActivation old and verifies with any key still valid (see KeyOverlap). Load reads the
// keys; Start keeps them fresh (every KeyRefreshInterval, and soon after Refresh) on a
// goroutine that lives from Start until Stop. It is safe for concurrent use.
type Keyring struct {
	pool opsqsql.Pool
	log  *slog.Logger
	wake chan struct{}

	startstop.Loop // reloads the keys, from Start until Stop

	mu struct {
		sync.RWMutex
		keys map[int]clusterKey
	}
}

// NewKeyring returns an empty keyring reading the keys from pool; Load it before use.
func NewKeyring(pool opsqsql.Pool, log *slog.Logger) *Keyring {
	return &Keyring{pool: pool, log: log, wake: make(chan struct{}, 1)}
}

// NewStaticKeyring returns a keyring holding secrets as the keys 1, 2, … (the last one
// signs), from no database: for tests and tools that sign and verify without one. Do not
// Start it.
func NewStaticKeyring(secrets ...[]byte) *Keyring {
	k := NewKeyring(nil, slog.New(slog.DiscardHandler))
	k.mu.keys = map[int]clusterKey{}
	for i, s := range secrets {
		k.mu.keys[i+1] = clusterKey{id: i + 1, secret: secret(s)}
	}
	return k
}

// Load reads the keys that still verify. It fails when there is none, or when one is too
// short to be a secret; the keys held before stay then.
func (k *Keyring) Load(ctx context.Context) error {
	rows, err := opsqsql.New(k.pool).ClusterKeysLoad(ctx, opsqsql.ClusterKeysLoadParams{OverlapMicros: KeyOverlap.Microseconds()})
	if err != nil {
		return fmt.Errorf(`reading opsq.cluster_keys (is the schema current? "opsq migrate up"): %w`, err)
	}
	now := time.Now()
	keys := map[int]clusterKey{}
	for _, r := range rows {
		if len(r.Secret) < keySecretMin {
			return fmt.Errorf("reading opsq.cluster_keys: cluster key %d has a secret of %d bytes; want at least %d", r.ID, len(r.Secret), keySecretMin)
		}
		ck := clusterKey{id: r.ID, secret: secret(r.Secret), signsFrom: now.Add(KeyActivation - time.Duration(r.AgeMicros)*time.Microsecond)}
		if r.LeftMicros != nil {
			ck.until = now.Add(time.Duration(*r.LeftMicros) * time.Microsecond)
		}
		keys[r.ID] = ck
	}
	if len(keys) == 0 {
		return errNoClusterKey
	}
	k.mu.Lock()
	k.mu.keys = keys
	k.mu.Unlock()
	return nil
}

var _ startstop.Service = (*Keyring)(nil)

// Start reloads the keys every KeyRefreshInterval, and soon after each Refresh, until
// Stop. A failed reload keeps the keys held and is logged.
func (k *Keyring) Start(ctx context.Context) error {
	k.Go(ctx, func(ctx context.Context) {
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
	})
	return nil
}

// Refresh asks the goroutine of Start to reload the keys now (a rotation was announced).
func (k *Keyring) Refresh() {
	select {
	case k.wake <- struct{}{}:
	default: // a reload is pending already
	}
}

// signingKey is the newest key that is KeyActivation old or, when none is, the oldest.
func (k *Keyring) signingKey() clusterKey {
	now := time.Now()
	k.mu.RLock()
	defer k.mu.RUnlock()
	var active, oldest clusterKey
	for _, ck := range k.mu.keys {
		if !now.Before(ck.signsFrom) && ck.id > active.id {
			active = ck
		}
		if oldest.id == 0 || ck.id < oldest.id {
			oldest = ck
		}
	}
	if active.id != 0 {
		return active
	}
	return oldest
}

// Sign returns the signing key's id and the MAC under it of msg(that id): for messages
// other than tokens (forwarded requests), which name the key that signs them and each
// start with a label of their own, so that no MAC made for one verifies as another's.
func (k *Keyring) Sign(msg func(keyID int) []byte) (keyID int, mac []byte) {
	key := k.signingKey()
	return key.id, macOf(key.secret, msg(key.id))
}

// Verify reports whether mac is the MAC of msg under key keyID, and that key still
// verifies (it is the newest, or KeyOverlap has not passed since its successor was made).
func (k *Keyring) Verify(keyID int, msg, mac []byte) bool {
	k.mu.RLock()
	key, ok := k.mu.keys[keyID]
	k.mu.RUnlock()
	if !ok || len(mac) != MACLen || !key.until.IsZero() && !time.Now().Before(key.until) {
		return false
	}
	return hmac.Equal(mac, macOf(key.secret, msg))
}

// LogValue shows the key ids only.
func (k *Keyring) LogValue() slog.Value {
	k.mu.RLock()
	defer k.mu.RUnlock()
	ids := slices.Sorted(maps.Keys(k.mu.keys))
	return slog.GroupValue(slog.Any("ids", ids))
}

// Format prints the key id only.
func (ck clusterKey) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "cluster key %d", ck.id) }

// LogValue shows the key id only.
func (ck clusterKey) LogValue() slog.Value { return slog.IntValue(ck.id) }

// Format prints the key ids only.
func (k *Keyring) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "cluster keys %v", k.LogValue())
}

// macOf is the MAC of msg under s. A MAC is made for every token handed out and checked
// for every one completed, so the HMAC states are pooled: hmac.New hashes the key's two
// pads and allocates, while a Reset of a used state restores them from its copy (about a
// third of the work, measured by BenchmarkMAC). A pooled state made for another key (after
// a rotation) is made anew.
func macOf(s secret, msg []byte) []byte {
	m, _ := macStates.Get().(*macState)
	if m == nil || !bytes.Equal(m.key, s) {
		m = &macState{key: bytes.Clone(s), h: hmac.New(sha256.New, s)}
	} else {
		m.h.Reset()
	}
	m.h.Write(msg)
	var sum [sha256.Size]byte
	mac := bytes.Clone(m.h.Sum(sum[:0])[:MACLen])
	macStates.Put(m)
	return mac
}

// macState is an HMAC state and the key it was made for.
type macState struct {
	key secret
	h   hash.Hash
}

var macStates sync.Pool
