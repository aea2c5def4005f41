// Package apikeys is opsq's API keys (DESIGN.md §8): the table opsq.api_keys, making,
// listing and revoking keys, and Set, the cache of the keys an instance checks requests
// against without a database round trip.
//
// A key is "opsq_" followed by 43 characters of base64url (32 random bytes). The table keeps
// its SHA-256, never the key: a key is shown once, when it is made.
package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"time"

	"opsq/queuer"
	opsqsql "opsq/sql"
)

// Role is what a key may do.
type Role string

// The roles (DESIGN.md §8; api/auth.go has the routes of each).
const (
	// Producer submits, and reads, lists, cancels, retries, pauses and resumes the
	// submissions of its tenant (Key.Tenant) only.
	Producer Role = "producer"
	// Consumer reserves, completes, fails and extends, and reads statuses, of the
	// submissions of its tenants (Key.Tenants; nil: all).
	Consumer Role = "consumer"
	// Admin may call everything, /v1/cluster included, on every tenant.
	Admin Role = "admin"
	// Metrics may read GET /metrics only.
	Metrics Role = "metrics"
)

// Roles lists every role.
var Roles = []Role{Producer, Consumer, Admin, Metrics}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("role %q: want producer, consumer, admin or metrics", s)
}

// Prefix starts every key opsq makes, so that a key is recognisable (in a secret scanner,
// say). Keys made with psql should have it too; an instance accepts any key whose hash it
// holds.
const Prefix = "opsq_"

// secretBytes is how many random bytes a key holds.
const secretBytes = 32

// Generate returns a new key: Prefix and 32 random bytes in base64url, without padding.
func Generate() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Hash is the SHA-256 of key, what the table holds.
func Hash(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// Key is one row of opsq.api_keys, without its hash.
type Key struct {
	ID         int64      `json:"id"`
	Name       string     `json:"name"`
	Role       Role       `json:"role"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	// Tenant is a producer key's tenant ("default" unless said otherwise).
	Tenant string `json:"tenant"`
	// Tenants are the tenants a consumer key may reserve from; nil: all.
	Tenants []string `json:"tenants"`
}

// DB is what the functions of this package run their statements on: a *pgxpool.Pool, a
// *pgx.Conn or a pgx.Tx (sql.DB, which the statements run on).
type DB = opsqsql.DB

var (
	// ErrExists: a key of that name exists already (revoked or not: names are never reused).
	ErrExists = errors.New("apikeys: a key of that name exists already")
	// ErrNotFound: no key of that name.
	ErrNotFound = errors.New("apikeys: no key of that name")
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// CheckName reports whether name can name a key: 1 to 64 letters, digits, '.', '_' or '-'.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("key name %q: want 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	return nil
}

// Spec is a key to make.
type Spec struct {
	Name string
	Role Role
	// Expires is how long the key is valid; 0: forever.
	Expires time.Duration
	// Tenant is a producer key's tenant; "" is "default". Only for producers.
	Tenant string
	// Tenants limits a consumer key to those tenants; nil: all. Only for consumers.
	Tenants []string
}

// Create makes a key named name with role; it expires after expires (0: never). It returns
// the row and the key, which is shown nowhere else. A producer key it makes belongs to
// the tenant "default", a consumer key may reserve from every tenant (CreateSpec for
// others).
func Create(ctx context.Context, db DB, name string, role Role, expires time.Duration) (Key, string, error) {
	return CreateSpec(ctx, db, Spec{Name: name, Role: role, Expires: expires})
}

// CreateSpec is Create with a tenant (a producer's) or tenants (a consumer's).
func CreateSpec(ctx context.Context, db DB, spec Spec) (Key, string, error) {
	key := Generate()
	k, err := AddSpec(ctx, db, spec, key)
	if err != nil {
		return Key{}, "", err
	}
	return k, key, nil
}

// MinKeyLen is the shortest key Add takes: Generate's keys are 48 characters.
const MinKeyLen = 32

// Add is Create with a key made elsewhere (an operator's bootstrap key, say), at least
// MinKeyLen characters long.
func Add(ctx context.Context, db DB, name string, role Role, expires time.Duration, key string) (Key, error) {
	return AddSpec(ctx, db, Spec{Name: name, Role: role, Expires: expires}, key)
}

// AddSpec is Add with a tenant (a producer's) or tenants (a consumer's).
func AddSpec(ctx context.Context, db DB, spec Spec, key string) (Key, error) {
	name, role, expires := spec.Name, spec.Role, spec.Expires
	if err := CheckName(name); err != nil {
		return Key{}, err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return Key{}, err
	}
	if expires < 0 {
		return Key{}, fmt.Errorf("expiry %s: must be positive, or 0 for never", expires)
	}
	if spec.Tenant != "" && role != Producer {
		return Key{}, fmt.Errorf("a tenant is for producer keys; a %s key has none (consumer keys: tenants)", role)
	}
	if spec.Tenants != nil && role != Consumer {
		return Key{}, fmt.Errorf("tenants are for consumer keys; a %s key has none (producer keys: one tenant)", role)
	}
	if spec.Tenants != nil && len(spec.Tenants) == 0 {
		return Key{}, errors.New("tenants: name at least one, or none at all for every tenant")
	}
	for _, t := range append([]string{spec.Tenant}, spec.Tenants...) {
		if t == "" {
			continue
		}
		if err := queuer.CheckTenant(t); err != nil {
			return Key{}, err
		}
	}
	if len(key) < MinKeyLen {
		return Key{}, fmt.Errorf("the key is %d characters long; want at least %d (make one with: echo \"opsq_$(openssl rand -base64 32 | tr '+/' '-_' | tr -d '=')\")", len(key), MinKeyLen)
	}
	var expiresAt *time.Time
	if expires > 0 {
		t := time.Now().Add(expires)
		expiresAt = &t
	}
	sum := Hash(key)
	r, err := opsqsql.New(db).APIKeyCreate(ctx, opsqsql.APIKeyCreateParams{
		Name: name, Role: string(role), SHA256: sum[:], ExpiresAt: expiresAt,
		Tenant: spec.Tenant, Tenants: spec.Tenants,
	})
	if errors.Is(err, opsqsql.ErrAPIKeyNameTaken) {
		return Key{}, fmt.Errorf("%w: %q (revoked keys keep their names; choose another)", ErrExists, name)
	}
	if err != nil {
		return Key{}, fmt.Errorf("creating API key %q: %w", name, err)
	}
	return keyOf(r), nil
}

// List returns every key, revoked and expired ones included, by name.
func List(ctx context.Context, db DB) ([]Key, error) {
	rows, err := opsqsql.New(db).APIKeysList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing API keys: %w", err)
	}
	keys := make([]Key, len(rows))
	for i, r := range rows {
		keys[i] = keyOf(r)
	}
	return keys, nil
}

// Revoke revokes the key named name: every instance refuses it within a second. Revoking a
// revoked key changes nothing.
func Revoke(ctx context.Context, db DB, name string) (Key, error) {
	r, err := opsqsql.New(db).APIKeyRevoke(ctx, opsqsql.APIKeyRevokeParams{Name: name})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return Key{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Key{}, fmt.Errorf("revoking API key %q: %w", name, err)
	}
	return keyOf(r), nil
}

// keyOf is the key of row r.
func keyOf(r opsqsql.APIKeyRow) Key {
	return Key{
		ID: r.ID, Name: r.Name, Role: Role(r.Role), CreatedAt: r.CreatedAt,
		ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, LastUsedAt: r.LastUsedAt,
		Tenant: r.Tenant, Tenants: r.Tenants,
	}
}
