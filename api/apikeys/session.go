package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	opsqsql "opsq/sql"
)

// SessionTTL is how long a dashboard session lasts (DESIGN.md §8).
const SessionTTL = 12 * time.Hour

// ErrNoSession: the session id names no live session (never made, ended at logout, or
// older than SessionTTL).
var ErrNoSession = errors.New("no such dashboard session")

// NewSession starts a dashboard session for caller (migrations/00010_ui_sessions.sql) and
// returns its id, 32 random bytes in base64url: what the browser keeps instead of the key.
// Only the id's SHA-256 is stored.
func (s *Set) NewSession(ctx context.Context, caller Caller) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("making a session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(id))
	if err := opsqsql.New(s.pool).UISessionCreate(ctx, opsqsql.UISessionParams{IDSHA256: sum[:], KeyID: caller.ID, TTL: SessionTTL}); err != nil {
		return "", fmt.Errorf("storing a dashboard session: %w", err)
	}
	return id, nil
}

// Session returns the caller of the live session id: ErrNoSession when there is none, or
// Check's errors when its key was revoked or expired since.
func (s *Set) Session(ctx context.Context, id string) (Caller, error) {
	if id == "" || len(id) > 64 {
		return Caller{}, ErrNoSession
	}
	sum := sha256.Sum256([]byte(id))
	keyID, err := opsqsql.New(s.pool).UISessionKey(ctx, opsqsql.UISessionParams{IDSHA256: sum[:]})
	switch {
	case errors.Is(err, opsqsql.ErrNotFound):
		return Caller{}, ErrNoSession
	case err != nil:
		return Caller{}, fmt.Errorf("reading a dashboard session: %w", err)
	}
	return s.CheckID(keyID)
}

// EndSession ends the session id (logout), on every instance at once.
func (s *Set) EndSession(ctx context.Context, id string) error {
	if id == "" || len(id) > 64 {
		return nil
	}
	sum := sha256.Sum256([]byte(id))
	if err := opsqsql.New(s.pool).UISessionEnd(ctx, opsqsql.UISessionParams{IDSHA256: sum[:]}); err != nil {
		return fmt.Errorf("ending a dashboard session: %w", err)
	}
	return nil
}
