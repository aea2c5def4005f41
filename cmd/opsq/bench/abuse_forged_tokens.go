package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	mrand "math/rand/v2"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/queuer"
	"opsq/queuer/opsqtype"
)

// The forged tokens of the abuse workload (DESIGN.md §8): --abuse-forged tokens, sent to
// complete and to fail, half of them real burn-down tokens with one character changed,
// half built by hand in today's token layout with a random MAC. Each is answered
// "unknown"; the burn-down's ledger (abuse_burndown.go) tells whether one of them
// completed a chunk.

// abuseForgedBatch is how many forged tokens go in one request.
const abuseForgedBatch = 100

// forgedTokensName names the forged tokens in the report.
const forgedTokensName = "forged tokens"

// forgedTokensCase is the case of the forged tokens.
func (a *abuseRun) forgedTokensCase() abuseCase {
	return abuseCase{
		run: a.forgeTokens,
		report: func() {
			want := string(wire.StatusUnknown)
			a.reportAnswers(forgedTokensName, want, func(status string) bool { return status == want })
		},
	}
}

// forgeTokens sends --abuse-forged forged tokens, half to complete and half to fail with
// retry false, in batches: half are real burn-down tokens with one character changed, half
// are built by hand (today's token layout) for burn-down chunks.
func (a *abuseRun) forgeTokens(ctx context.Context) {
	cl, err := a.clients[0].Cluster(ctx)
	generation := map[int]int64{}
	if err == nil {
		for _, in := range cl.Instances {
			for _, s := range in.Shards {
				generation[s.Shard] = s.Generation
			}
		}
	}
	no := false
	sent := 0
	for i := 0; sent < a.r.cfg.AbuseForged && ctx.Err() == nil; i++ {
		batch := make([]string, 0, abuseForgedBatch)
		for len(batch) < min(abuseForgedBatch, a.r.cfg.AbuseForged-sent) {
			if len(batch)%2 == 0 {
				if t := a.ledger.recentToken(); t != "" {
					batch = append(batch, changeOneChar(t))
					continue
				}
			}
			batch = append(batch, a.handBuiltToken(generation))
		}
		c := a.clients[i%len(a.clients)]
		var results []wire.TokenResult
		if i%2 == 0 {
			comps := make([]wire.Completion, len(batch))
			for j, t := range batch {
				comps[j] = wire.Completion{Token: t, Output: "forged"}
			}
			results, err = c.Complete(ctx, comps...)
		} else {
			fails := make([]wire.ChunkFailure, len(batch))
			for j, t := range batch {
				fails[j] = wire.ChunkFailure{Token: t, Error: "forged", Retry: &no}
			}
			results, err = c.Fail(ctx, fails...)
		}
		sent += len(batch)
		if err != nil {
			a.answered(forgedTokensName, "error")
			continue
		}
		for _, res := range results {
			a.answered(forgedTokensName, string(res.Status))
		}
		_ = clustertest.SleepCtx(ctx, 20*time.Millisecond)
	}
}

// changeOneChar changes one character of a base64url token to another.
func changeOneChar(t string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := []byte(t)
	i := mrand.IntN(len(b))
	for {
		c := alphabet[mrand.IntN(len(alphabet))]
		if c != b[i] {
			b[i] = c
			return string(b)
		}
	}
}

// handBuiltToken builds a token for a burn-down chunk in today's layout (version 2:
// submission id, chunk index, shard, generation, retries, a random nonce, the id of the
// first cluster key, then a MAC), as an attacker who read the source but does not have the
// cluster secret would: the MAC is random.
func (a *abuseRun) handBuiltToken(generation map[int]int64) string {
	id, total := a.ledger.randomSubmission()
	if total == 0 {
		id, total = 1, 1
	}
	idx := mrand.IntN(int(total))
	shard := opsqtype.ShardOf(id, idx, max(a.shards, 1))
	b := make([]byte, 0, 39+queuer.TokenMACLen)
	b = append(b, 2)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(idx))
	b = binary.BigEndian.AppendUint16(b, uint16(shard))
	b = binary.BigEndian.AppendUint64(b, uint64(generation[shard]))
	b = binary.BigEndian.AppendUint32(b, 0) // retries
	b = binary.BigEndian.AppendUint64(b, mrand.Uint64())
	b = binary.BigEndian.AppendUint32(b, 1) // the key id of the migration's key
	mac := make([]byte, queuer.TokenMACLen)
	_, _ = rand.Read(mac)
	return base64.RawURLEncoding.EncodeToString(append(b, mac...))
}
