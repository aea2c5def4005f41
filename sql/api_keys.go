package sql

import (
	"context"
	_ "embed"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// API keys (apikeys).

// APIKeyRow is a row of opsq.api_keys without its hash, as api_key_create.sql,
// api_keys_list.sql and api_key_revoke.sql return it.
type APIKeyRow struct {
	ID         int64      `db:"id"`
	Name       string     `db:"name"`
	Role       string     `db:"role"`
	CreatedAt  time.Time  `db:"created_at"`
	ExpiresAt  *time.Time `db:"expires_at"`
	RevokedAt  *time.Time `db:"revoked_at"`
	LastUsedAt *time.Time `db:"last_used_at"`
	// Tenant is a producer key's tenant; Tenants the tenants a consumer key may reserve
	// from (nil: all).
	Tenant  string   `db:"tenant"`
	Tenants []string `db:"tenants"`
}

//go:embed api_key_create.sql
var apiKeyCreate string

// APIKeyCreateParams are api_key_create.sql's.
type APIKeyCreateParams struct {
	Name      string
	Role      string
	SHA256    []byte     // the SHA-256 of the key, never the key
	ExpiresAt *time.Time // nil: never
	Tenant    string     // a producer's tenant; "" is "default"
	Tenants   []string   // a consumer's tenants; nil: all
}

// ErrAPIKeyNameTaken means that a key of that name exists already (revoked keys keep
// their names).
var ErrAPIKeyNameTaken = errors.New("a key of that name exists already")

// errAPIKeySecretTaken means that another key has the same secret (the same SHA-256).
var errAPIKeySecretTaken = errors.New("another key has the same secret")

// APIKeyCreate adds a key and returns its row. It returns ErrAPIKeyNameTaken when the name
// is another key's, and an error saying so when the hash is.
func (q Queries) APIKeyCreate(ctx context.Context, p APIKeyCreateParams) (APIKeyRow, error) {
	r, err := collectOne[APIKeyRow](ctx, q.db, apiKeyCreate, pgx.NamedArgs{
		"name": p.Name, "role": p.Role, "sha256": p.SHA256, "expires_at": p.ExpiresAt,
		"tenant": p.Tenant, "tenants": p.Tenants,
	})
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "23505" {
		if pgErr.ConstraintName == "api_keys_sha256_key" {
			return APIKeyRow{}, errAPIKeySecretTaken
		}
		return APIKeyRow{}, ErrAPIKeyNameTaken
	}
	return r, err
}

//go:embed api_keys_list.sql
var apiKeysList string

// APIKeysList reads every key, revoked and expired ones included, by name. It has no
// parameters.
func (q Queries) APIKeysList(ctx context.Context) ([]APIKeyRow, error) {
	return collect[APIKeyRow](ctx, q.db, apiKeysList, nil)
}

//go:embed api_key_revoke.sql
var apiKeyRevoke string

// APIKeyRevokeParams are api_key_revoke.sql's.
type APIKeyRevokeParams struct {
	Name string
}

// APIKeyRevoke revokes the key named p.Name (revoking it again keeps the first time) and
// returns its row; ErrNotFound when no key has that name.
func (q Queries) APIKeyRevoke(ctx context.Context, p APIKeyRevokeParams) (APIKeyRow, error) {
	return collectOne[APIKeyRow](ctx, q.db, apiKeyRevoke, pgx.NamedArgs{"name": p.Name})
}

//go:embed api_keys_load.sql
var apiKeysLoad string

// APIKeysLoadRow is a key as an instance caches it: its hash, and whether it is revoked.
type APIKeysLoadRow struct {
	ID        int64      `db:"id"`
	Name      string     `db:"name"`
	Role      string     `db:"role"`
	SHA256    []byte     `db:"sha256"`
	ExpiresAt *time.Time `db:"expires_at"`
	Revoked   bool       `db:"revoked"`
	Tenant    string     `db:"tenant"`
	Tenants   []string   `db:"tenants"`
}

// APIKeysLoad reads every key with its hash, revoked and expired ones included, in no
// order. It has no parameters.
func (q Queries) APIKeysLoad(ctx context.Context) ([]APIKeysLoadRow, error) {
	return collect[APIKeysLoadRow](ctx, q.db, apiKeysLoad, nil)
}

//go:embed api_keys_touch.sql
var apiKeysTouch string

// APIKeysTouchParams are api_keys_touch.sql's.
type APIKeysTouchParams struct {
	IDs []int64
}

// APIKeysTouch records that the keys p.IDs were used now.
func (q Queries) APIKeysTouch(ctx context.Context, p APIKeysTouchParams) error {
	_, err := q.db.Exec(ctx, apiKeysTouch, pgx.NamedArgs{"ids": p.IDs})
	return err
}

//go:embed ui_session_create.sql
var uiSessionCreate string

// UISessionParams name a dashboard session by the SHA-256 of its id; KeyID and TTL are for
// UISessionCreate only.
type UISessionParams struct {
	IDSHA256 []byte
	KeyID    int64
	TTL      time.Duration
}

// UISessionCreate starts a dashboard session of key p.KeyID, ending after p.TTL, and deletes
// the sessions that ended.
func (q Queries) UISessionCreate(ctx context.Context, p UISessionParams) error {
	_, err := q.db.Exec(ctx, uiSessionCreate, pgx.NamedArgs{"id_sha256": p.IDSHA256, "key_id": p.KeyID, "ttl_ms": p.TTL.Milliseconds()})
	return err
}

//go:embed ui_session_read.sql
var uiSessionRead string

// UISessionKey returns the key of the live session p.IDSHA256; ErrNotFound when there is
// none or it ended.
func (q Queries) UISessionKey(ctx context.Context, p UISessionParams) (int64, error) {
	var id int64
	err := q.db.QueryRow(ctx, uiSessionRead, pgx.NamedArgs{"id_sha256": p.IDSHA256}).Scan(&id)
	return id, notFound(err)
}

//go:embed ui_session_end.sql
var uiSessionEnd string

// UISessionEnd ends the session p.IDSHA256, if it exists.
func (q Queries) UISessionEnd(ctx context.Context, p UISessionParams) error {
	_, err := q.db.Exec(ctx, uiSessionEnd, pgx.NamedArgs{"id_sha256": p.IDSHA256})
	return err
}
