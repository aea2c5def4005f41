package apikeys

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/queuer/startstop"
	opsqsql "opsq/sql"
)

// Channel is notified by the trigger on opsq.api_keys whenever a key is made, revoked,
// deleted or changed (not when it is used).
const Channel = "opsq_api_keys"

// RefreshInterval is how often a Set reloads the keys, in case it missed a NOTIFY.
const RefreshInterval = 30 * time.Second

// TouchInterval is how often, at most, an instance records that a key was used
// (opsq.api_keys.last_used_at).
const TouchInterval = time.Minute

// Why a key is refused: Check wraps one of these.
var (
	ErrUnknown = errors.New("unknown API key")
	ErrRevoked = errors.New("revoked API key")
	ErrExpired = errors.New("expired API key")
)

// Caller is the key a request was made with.
type Caller struct {
	ID   int64
	Name string
	Role Role
	// Tenant is a producer's tenant.
	Tenant string
	// Tenants are the tenants a consumer may reserve from; nil: all.
	Tenants []string
}

// Confined reports whether the caller sees only some tenants' submissions, and which: a
// producer its own, a consumer with a list those; an admin, a metrics key and a consumer
// without a list are not confined.
func (c Caller) Confined() ([]string, bool) {
	switch {
	case c.Role == Producer:
		return []string{c.Tenant}, true
	case c.Role == Consumer && c.Tenants != nil:
		return c.Tenants, true
	}
	return nil, false
}

// cached is a key as a Set holds it.
type cached struct {
	Caller
	sum     [32]byte
	expires time.Time // zero: never
	revoked bool
	touched *atomic.Int64 // unix nanoseconds of the last touch by this instance
}

// Set is an instance's cache of opsq.api_keys: Check costs no database round trip. Start
// loads the keys and keeps them fresh on a goroutine that lives until Stop: it reloads
// every RefreshInterval, and at once after each Notified, and records when keys were used.
// It does not LISTEN itself: the instance's one LISTEN connection (queuer.Config.Notified,
// or a notify.Listener of its own) calls Notified for each NOTIFY on Channel, so that a
// revocation takes effect within a second, and after each (re)connection. It is safe for
// concurrent use.
type Set struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	wake  chan struct{}
	touch chan int64
	// loaded is called after each load (tests wait on it); nil for none.
	loaded func()

	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.RWMutex
		keys    map[[32]byte]cached     // by the SHA-256 of the key
		byID    map[int64][32]byte      // the SHA-256 of each key, by id (sessions)
		touched map[int64]*atomic.Int64 // by key id, kept across reloads
	}
}

var _ startstop.Service = (*Set)(nil)

// NewSet returns an empty set reading from pool; Start it before use.
func NewSet(pool *pgxpool.Pool, log *slog.Logger) *Set {
	s := &Set{pool: pool, log: log, wake: make(chan struct{}, 1), touch: make(chan int64, 256)}
	s.mu.touched = map[int64]*atomic.Int64{}
	return s
}

// Start loads the keys, and keeps them fresh until Stop. ctx bounds the first load only.
func (s *Set) Start(ctx context.Context) error {
	if err := s.Load(ctx); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Add(1)
	go s.runRefresh(runCtx)
	return nil
}

// Stop ends the goroutine. Safe twice and before Start.
func (s *Set) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.wg.Wait()
}

// Notified hears a NOTIFY on Channel (a key was made, revoked or deleted), or, with an
// empty payload, that the LISTEN connection (re)connected and one may have been missed:
// the keys are reloaded soon.
func (s *Set) Notified(string) { s.Refresh() }

// Load reads every key. On an error the keys held before stay.
func (s *Set) Load(ctx context.Context) error {
	rows, err := opsqsql.New(s.pool).APIKeysLoad(ctx)
	if err != nil {
		return fmt.Errorf(`reading opsq.api_keys (is the schema current? "opsq migrate up"): %w`, err)
	}
	keys := make([]cached, 0, len(rows))
	for _, r := range rows {
		if len(r.SHA256) != sha256.Size {
			return fmt.Errorf("reading opsq.api_keys: API key %q has a %d-byte hash; want 32", r.Name, len(r.SHA256))
		}
		k := cached{Caller: Caller{ID: r.ID, Name: r.Name, Role: Role(r.Role), Tenant: r.Tenant, Tenants: r.Tenants}, revoked: r.Revoked}
		copy(k.sum[:], r.SHA256)
		if r.ExpiresAt != nil {
			k.expires = *r.ExpiresAt
		}
		keys = append(keys, k)
	}
	s.mu.Lock()
	touched := make(map[int64]*atomic.Int64, len(keys))
	bySum := make(map[[32]byte]cached, len(keys))
	byID := make(map[int64][32]byte, len(keys))
	for _, k := range keys {
		byID[k.ID] = k.sum
		t := s.mu.touched[k.ID]
		if t == nil {
			t = new(atomic.Int64)
		}
		touched[k.ID], k.touched = t, t
		bySum[k.sum] = k
	}
	s.mu.keys, s.mu.byID, s.mu.touched = bySum, byID, touched
	s.mu.Unlock()
	if s.loaded != nil {
		s.loaded()
	}
	return nil
}

// Check returns the caller whose key is key, or an error wrapping ErrUnknown, ErrRevoked
// or ErrExpired. It looks the key up by its hash, compares hashes in constant time, and
// reads no database.
func (s *Set) Check(key string) (Caller, error) {
	sum := Hash(key)
	// Found by its hash, so a check costs the same with ten keys or ten thousand. The
	// lookup's time tells nothing about a stored key (that would take a preimage of
	// SHA-256); the comparison of the hashes themselves is constant-time.
	s.mu.RLock()
	k, found := s.mu.keys[sum]
	s.mu.RUnlock()
	if !found || subtle.ConstantTimeCompare(sum[:], k.sum[:]) != 1 {
		return Caller{}, ErrUnknown
	}
	return s.usable(k)
}

// CheckID is Check for the key of id: a dashboard session holds its key's id, and is
// refused as soon as its key is revoked, expires or is deleted.
func (s *Set) CheckID(id int64) (Caller, error) {
	s.mu.RLock()
	sum, found := s.mu.byID[id]
	k := s.mu.keys[sum]
	s.mu.RUnlock()
	if !found {
		return Caller{}, ErrUnknown
	}
	return s.usable(k)
}

// usable returns k's caller unless it is revoked or expired, and records its use.
func (s *Set) usable(k cached) (Caller, error) {
	now := time.Now()
	switch {
	case k.revoked:
		return Caller{}, fmt.Errorf("%w (%q)", ErrRevoked, k.Name)
	case !k.expires.IsZero() && !now.Before(k.expires):
		return Caller{}, fmt.Errorf("%w (%q expired at %s)", ErrExpired, k.Name, k.expires.UTC().Format(time.RFC3339))
	}
	if last := k.touched.Load(); now.UnixNano()-last >= int64(TouchInterval) && k.touched.CompareAndSwap(last, now.UnixNano()) {
		select {
		case s.touch <- k.ID:
		default: // the writer is behind: this use goes unrecorded, the next one will not
			k.touched.Store(last)
		}
	}
	return k.Caller, nil
}

// Refresh asks for a reload now.
func (s *Set) Refresh() {
	select {
	case s.wake <- struct{}{}:
	default: // one is pending
	}
}

// runRefresh reloads on Refresh and every RefreshInterval, and records uses.
func (s *Set) runRefresh(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(RefreshInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-s.touch:
			ids := []int64{id}
		drain:
			for len(ids) < cap(s.touch) {
				select {
				case id := <-s.touch:
					ids = append(ids, id)
				default:
					break drain
				}
			}
			if err := opsqsql.New(s.pool).APIKeysTouch(ctx, opsqsql.APIKeysTouchParams{IDs: ids}); err != nil && ctx.Err() == nil {
				s.log.Warn("recording the use of API keys", slog.Any("error", err))
			}
			continue
		case <-tick.C:
		case <-s.wake:
		}
		if err := s.Load(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("reloading the API keys; keeping the ones held", slog.Any("error", err))
		}
	}
}
