package queuer

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"

	"opsq/reserver"
)

// A token names one reservation: the chunk, the shard and the claim generation it was
// reserved under, the chunk's retries count at that moment, and a random nonce that makes
// it unguessable and unique. Any instance can read it, so completions and failures are
// recorded wherever they arrive; only the owner of the shard holds the reservation itself.
type token struct {
	key        reserver.Key
	shard      int
	generation int64
	retries    int32
	nonce      uint64
}

const tokenVersion = 1

// tokenLen: version, submission id, chunk index, shard, generation, retries, nonce.
const tokenLen = 1 + 8 + 4 + 2 + 8 + 4 + 8

var errBadToken = errors.New("malformed token")

func newToken(key reserver.Key, shard int, generation int64, retries int32) token {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return token{key: key, shard: shard, generation: generation, retries: retries, nonce: binary.LittleEndian.Uint64(b[:])}
}

func (t token) String() string {
	b := make([]byte, 0, tokenLen)
	b = append(b, tokenVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.key.SubmissionID))
	b = binary.BigEndian.AppendUint32(b, uint32(t.key.ChunkIndex))
	b = binary.BigEndian.AppendUint16(b, uint16(t.shard))
	b = binary.BigEndian.AppendUint64(b, uint64(t.generation))
	b = binary.BigEndian.AppendUint32(b, uint32(t.retries))
	b = binary.BigEndian.AppendUint64(b, t.nonce)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseToken(s string) (token, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
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
	}
	if t.key.SubmissionID <= 0 || t.key.ChunkIndex < 0 || t.retries < 0 {
		return token{}, errBadToken
	}
	return t, nil
}
