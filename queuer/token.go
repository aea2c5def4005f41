package queuer

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"opsq/reserver"
	opsqsql "opsq/sql"
)

// A token names one reservation: the chunk, the shard and the claim generation it was
// reserved under, the chunk's retries count at that moment, and a random nonce that makes
// it unique. It is signed (DESIGN.md §8): it carries the id of the cluster key that signed
// it and an HMAC-SHA256 (truncated to MACLen bytes) of all its other bytes, so that nobody
// without the cluster secret can make or alter one. Any instance can read and verify it,
// so completions and failures are recorded wherever they arrive; only the owner of the
// shard holds the reservation itself.
type token struct {
	key        reserver.Key
	shard      int
	generation int64
	retries    int32
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

func newToken(key reserver.Key, shard int, generation int64, retries int32) token {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return token{key: key, shard: shard, generation: generation, retries: retries, nonce: binary.LittleEndian.Uint64(b[:])}
}

// signedBytes are the bytes the MAC covers.
// chunk names t's chunk to the statements.
func (t token) chunk() opsqsql.Chunk {
	return opsqsql.Chunk{Shard: t.shard, SubmissionID: t.key.SubmissionID, ChunkIndex: t.key.ChunkIndex}
}

func (t token) signedBytes() []byte {
	b := make([]byte, 0, tokenLen)
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.key.SubmissionID))
	b = binary.BigEndian.AppendUint32(b, uint32(t.key.ChunkIndex))
	b = binary.BigEndian.AppendUint16(b, uint16(t.shard))
	b = binary.BigEndian.AppendUint64(b, uint64(t.generation))
	b = binary.BigEndian.AppendUint32(b, uint32(t.retries))
	b = binary.BigEndian.AppendUint64(b, t.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(t.keyID))
	return b
}

// macMessage is what the MAC is made of: the label, then the signed bytes.
func (t token) macMessage() []byte {
	return append([]byte(tokenMACLabel), t.signedBytes()...)
}

// signed returns t signed with the signing key of k.
func (t token) signed(k *Keyring) token {
	key := k.signingKey()
	t.keyID = key.id
	copy(t.mac[:], macOf(key.secret, t.macMessage()))
	return t
}

// verify reports whether t's MAC verifies under a cluster key that is still valid.
func (t token) verify(k *Keyring) bool {
	return k.Verify(t.keyID, t.macMessage(), t.mac[:])
}

// String is the token's text: base64url without padding.
func (t token) String() string {
	return base64.RawURLEncoding.EncodeToString(append(t.signedBytes(), t.mac[:]...))
}

// parseToken reads a token's text; it does not verify the MAC (see readToken). The text is
// canonical: one token has exactly one text that parses.
func parseToken(s string) (token, error) {
	if len(s) != tokenEncodedLen {
		return token{}, errBadToken
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tokenLen || b[0] != tokenVersion {
		return token{}, errBadToken
	}
	b = b[1:]
	t := token{
		key: reserver.Key{
			SubmissionID: int64(binary.BigEndian.Uint64(b[0:8])),
			ChunkIndex:   int32(binary.BigEndian.Uint32(b[8:12])),
		},
		shard:      int(binary.BigEndian.Uint16(b[12:14])),
		generation: int64(binary.BigEndian.Uint64(b[14:22])),
		retries:    int32(binary.BigEndian.Uint32(b[22:26])),
		nonce:      binary.BigEndian.Uint64(b[26:34]),
		keyID:      int(binary.BigEndian.Uint32(b[34:38])),
	}
	copy(t.mac[:], b[38:])
	if t.key.SubmissionID <= 0 || t.key.ChunkIndex < 0 || t.retries < 0 || t.keyID <= 0 || t.keyID > 1<<31-1 {
		return token{}, errBadToken
	}
	return t, nil
}

// readToken parses and verifies a consumer's token; false means "unknown": malformed,
// signed by no valid cluster key, or naming a shard this database does not have. Nothing
// is to be done with such a token, not even a query.
func (q *Queuer) readToken(s string) (token, bool) {
	t, err := parseToken(s)
	if err != nil || t.shard >= q.shardCount || !t.verify(q.keys) {
		return token{}, false
	}
	return t, true
}

// TokenClaim returns the shard and the claim generation a token's text was issued under,
// without verifying its MAC: for tests and tools that check fencing from outside.
func TokenClaim(s string) (shard int, generation int64, err error) {
	t, err := parseToken(s)
	if err != nil {
		return 0, 0, fmt.Errorf("token %q: %w", s, err)
	}
	return t.shard, t.generation, nil
}
