package outcome

import (
	"context"
	"time"

	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
)

// Extended is the outcome of extending one token.
type Extended struct {
	Status    opsqtype.TokenStatus
	ExpiresAt *time.Time
}

// Extend moves the leases of tokens to now + lease. A token whose shard another instance
// owns is forwarded to that owner (unless forwarded already); a token whose shard changed
// owner since it was reserved is "lost".
func (o *Recorder) Extend(ctx context.Context, tokens []string, lease time.Duration, forwarded bool) ([]Extended, error) {
	out := make([]Extended, len(tokens))
	remote := map[int][]int{} // shard -> indexes of tokens owned elsewhere
	for i, tok := range tokens {
		t, ok := o.readToken(tok)
		if !ok {
			out[i].Status = opsqtype.StatusUnknown
			continue
		}
		l, owned := o.cfg.Claims.Lease(t.Shard)
		switch {
		case owned && l.Generation != t.Generation:
			out[i].Status = opsqtype.StatusLost
		case owned:
			expires := o.cfg.Now().Add(lease)
			if _, ok := o.cfg.Reserver.Extend(tok, expires); ok {
				out[i] = Extended{Status: opsqtype.StatusExtended, ExpiresAt: &expires}
			}
		case !forwarded:
			remote[t.Shard] = append(remote[t.Shard], i)
			continue
		}
		if out[i].Status == "" {
			st, err := o.goneStatus(ctx, t)
			if err != nil {
				return nil, err
			}
			out[i].Status = st
		}
	}
	for shard, idx := range remote {
		if err := o.extendRemote(ctx, shard, tokens, idx, lease, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// goneStatus answers for a token without a live reservation: already_finished when its
// chunk is finished, unknown when nobody knows it, else lost.
func (o *Recorder) goneStatus(ctx context.Context, t tokens.Token) (opsqtype.TokenStatus, error) {
	state, _, err := readChunk(ctx, o.cfg.Pool, t)
	switch {
	case err != nil:
		return "", err
	case state == chunkFinished:
		return opsqtype.StatusAlreadyFinished, nil
	case state == chunkUnknown:
		return opsqtype.StatusUnknown, nil
	}
	return opsqtype.StatusLost, nil
}

// extendRemote forwards the tokens idx (all of shard) to the shard's owner.
func (o *Recorder) extendRemote(ctx context.Context, shard int, toks []string, idx []int, lease time.Duration, out []Extended) error {
	batch := make([]string, len(idx))
	for j, i := range idx {
		batch[j] = toks[i]
	}
	results, err := o.cfg.Router.Extend(ctx, shard, batch, lease)
	if err != nil {
		return err
	}
	for j, i := range idx {
		if j < len(results) && results[j].Status != "" {
			out[i] = Extended{Status: results[j].Status, ExpiresAt: results[j].ExpiresAt}
			continue
		}
		t, _ := tokens.Parse(toks[i])
		st, err := o.goneStatus(ctx, t) // no owner, or it did not answer
		if err != nil {
			return err
		}
		out[i].Status = st
	}
	return nil
}
