// Package tokens makes, signs and reads reservation tokens (DESIGN.md §8), and holds the
// cluster keys that sign them (Keyring). A token is text a consumer carries between its
// reserve and its complete, fail or extend: any instance reads and verifies it, so an
// outcome is recorded wherever it arrives. It does not decide what a token may do (the
// outcomes do, against the database and the reservations) and keeps no reservation.
package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"opsq/reserver"
	opsqsql "opsq/sql"
)

// A Token names one reservation: the chunk, the shard and the claim generation it was
// reserved under, the chunk's attempt at that moment (Retries: its attempt_base + retries,
// migrations/00016, which a retry of its submission never sets back; the retries count
// itself for a chunk never retried by its producer, and for every token made before
// attempt_base existed), and a random nonce that makes it unique. It is signed (DESIGN.md §8): it carries the id of the cluster key that signed
// it and an HMAC-SHA256 (truncated to MACLen bytes) of all its other bytes, so that nobody
// without the cluster secret can make or alter one. Any instance can read and verify it,
// so completions and failures are recorded wherever they arrive; only the owner of the
// shard holds the reservation itself.
type Token struct {
	Key        reserver.Key
	Shard      int
	Generation int64
	Retries    int32
	nonce      uint64
	keyID      int
	mac        [MACLen]byte
}

// tokenVersion 2: signed. Tokens of version 1 (unsigned) are refused.
const tokenVersion = 2

// Layout, big-endian: version (1), submission id (8), chunk index (4), shard (2),
// generation (8), retries (4), nonce (8), key id (4), then the MAC of all of these.
const (
	tokenSignedLen = 1 + 8 + 4 + 2 + 8 + 4 + 8 + 4
	tokenLen       = tokenSignedLen + MACLen
)

// tokenEncodedLen is the length of a token's text: base64url without padding.
var tokenEncodedLen = base64.RawURLEncoding.EncodedLen(tokenLen)

// tokenMACLabel starts the message a token's MAC is made of, so that a MAC the cluster key
// makes for anything else never verifies as a token's.
const tokenMACLabel = "opsq token\x00"

var errBadToken = errors.New("malformed token")

// New returns a new, unsigned token of a reservation: Signed signs it.
func New(key reserver.Key, shard int, generation int64, retries int32) Token {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return Token{Key: key, Shard: shard, Generation: generation, Retries: retries, nonce: binary.LittleEndian.Uint64(b[:])}
}

// Chunk names t's chunk to the statements.
func (t Token) Chunk() opsqsql.Chunk {
	return opsqsql.Chunk{Shard: t.Shard, SubmissionID: t.Key.SubmissionID, ChunkIndex: t.Key.ChunkIndex}
}

// signedBytes are the bytes the MAC covers.
func (t Token) signedBytes() []byte {
	b := make([]byte, 0, tokenLen)
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Key.SubmissionID))
	b = binary.BigEndian.AppendUint32(b, uint32(t.Key.ChunkIndex))
	b = binary.BigEndian.AppendUint16(b, uint16(t.Shard))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Generation))
	b = binary.BigEndian.AppendUint32(b, uint32(t.Retries))
	b = binary.BigEndian.AppendUint64(b, t.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(t.keyID))
	return b
}

// macMessage is what the MAC is made of: the label, then the signed bytes.
func (t Token) macMessage() []byte {
	return append([]byte(tokenMACLabel), t.signedBytes()...)
}

// Signed returns t signed with the signing key of k.
func (t Token) Signed(k *Keyring) Token {
	key := k.signingKey()
	t.keyID = key.id
	copy(t.mac[:], macOf(key.secret, t.macMessage()))
	return t
}

// verify reports whether t's MAC verifies under a cluster key that is still valid.
func (t Token) verify(k *Keyring) bool {
	return k.Verify(t.keyID, t.macMessage(), t.mac[:])
}

// KeyID is the id of the cluster key that signed t (0: unsigned).
func (t Token) KeyID() int { return t.keyID }

// String is the token's text: base64url without padding.
func (t Token) String() string {
	return base64.RawURLEncoding.EncodeToString(append(t.signedBytes(), t.mac[:]...))
}

// Parse reads a token's text; it does not verify the MAC (see Keyring.Read). The text is
// canonical: one token has exactly one text that parses.
func Parse(s string) (Token, error) {
	if len(s) != tokenEncodedLen {
		return Token{}, errBadToken
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tokenLen || b[0] != tokenVersion {
		return Token{}, errBadToken
	}
	b = b[1:]
	t := Token{
		Key: reserver.Key{
			SubmissionID: int64(binary.BigEndian.Uint64(b[0:8])),
			ChunkIndex:   int32(binary.BigEndian.Uint32(b[8:12])),
		},
		Shard:      int(binary.BigEndian.Uint16(b[12:14])),
		Generation: int64(binary.BigEndian.Uint64(b[14:22])),
		Retries:    int32(binary.BigEndian.Uint32(b[22:26])),
		nonce:      binary.BigEndian.Uint64(b[26:34]),
		keyID:      int(binary.BigEndian.Uint32(b[34:38])),
	}
	copy(t.mac[:], b[38:])
	if t.Key.SubmissionID <= 0 || t.Key.ChunkIndex < 0 || t.Retries < 0 || t.keyID <= 0 || t.keyID > 1<<31-1 {
		return Token{}, errBadToken
	}
	return t, nil
}

// Read parses and verifies a consumer's token; false means "unknown": malformed, signed by
// no valid cluster key, or naming a shard past shardCount. Nothing is to be done with
// such a token, not even a query.
func (k *Keyring) Read(s string, shardCount int) (Token, bool) {
	t, err := Parse(s)
	if err != nil || t.Shard >= shardCount || !t.verify(k) {
		return Token{}, false
	}
	return t, true
}

// Claim returns the shard and the claim generation a token's text was issued under,
// without verifying its MAC: for tests and tools that check fencing from outside.
func Claim(s string) (shard int, generation int64, err error) {
	t, err := Parse(s)
	if err != nil {
		return 0, 0, fmt.Errorf("token %q: %w", s, err)
	}
	return t.Shard, t.Generation, nil
}
