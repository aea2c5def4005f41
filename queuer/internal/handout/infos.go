package handout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"opsq/queuer/opsqtype"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/strategy"
)

// submissionInfo is what a consumer gets with each chunk of a submission, cached. Its
// strategic metadata is decoded once here, for every chunk of the submission to share.
type submissionInfo struct {
	metadata  string
	strategic json.RawMessage
	// decoded is the strategic metadata as the api answers it; read-only, shared.
	decoded map[string]opsqtype.MetadataValue
	values  map[string]string // strategic metadata, key -> canonical JSON value
	// pairs is values prepared for the reserver, outside its lock.
	pairs      *reserver.Pairs
	prefix     *string
	maxRetries int32
	tenant     string
	// traceparent is the W3C traceparent the submission was sent with; "" for none.
	traceparent string
	// bytes is what each chunk of the submission takes in a reserve answer besides its
	// input: its metadata, strategic metadata and prefix, and the fields of every chunk
	// (see answer.go).
	bytes int
}

// infoCache owns the submissionInfo of in-progress submissions, read from the database
// on a miss. Entries go when the submission finishes (NOTIFY); the whole cache is dropped
// when it grows past its bound. Safe for concurrent use.
type infoCache struct {
	pool opsqsql.Pool
	mu   struct {
		sync.Mutex
		byID map[int64]*submissionInfo
	}
}

const infoCacheMax = 100_000

func newInfoCache(pool opsqsql.Pool) *infoCache {
	c := &infoCache{pool: pool}
	c.mu.byID = map[int64]*submissionInfo{}
	return c
}

// forget drops the info of a submission that finished.
func (c *infoCache) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.mu.byID, id)
}

// get returns the infos of the candidates' submissions that are in progress.
func (c *infoCache) get(ctx context.Context, cands []candidate) (map[int64]*submissionInfo, error) {
	out := make(map[int64]*submissionInfo, 4)
	var missing []int64
	c.mu.Lock()
	for _, cand := range cands {
		id := cand.key.SubmissionID
		if _, ok := out[id]; ok {
			continue
		}
		if info, ok := c.mu.byID[id]; ok {
			out[id] = info
		} else if !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	err := opsqsql.New(c.pool).SubmissionInfo(ctx, opsqsql.SubmissionInfoParams{IDs: missing}, func(r opsqsql.SubmissionInfoRow) error {
		id := r.ID
		in := submissionInfo{metadata: r.Metadata, prefix: r.Prefix, maxRetries: r.MaxRetries, tenant: r.Tenant}
		in.strategic = append(json.RawMessage(nil), r.StrategicMetadata...)
		var values map[string]json.RawMessage
		if err := json.Unmarshal(in.strategic, &values); err != nil {
			return fmt.Errorf("strategic metadata of %d: %w", id, err)
		}
		in.values = make(map[string]string, len(values)+1)
		in.decoded = make(map[string]opsqtype.MetadataValue, len(values))
		for k, v := range values {
			in.values[k] = string(v)
			var mv opsqtype.MetadataValue
			if err := json.Unmarshal(v, &mv); err != nil {
				return fmt.Errorf("strategic metadata %s of %d: %w", k, id, err)
			}
			in.decoded[k] = mv
		}
		// The tenant, as the strategy key "@tenant" (its JSON text, like a strategic
		// value's); not in decoded, which is what the consumer gets.
		tenant, _ := json.Marshal(r.Tenant)
		in.values[strategy.TenantKey] = string(tenant)
		in.pairs = reserver.NewPairs(in.values)
		in.bytes = answerChunkOverhead + opsqtype.JSONStringLen(in.metadata) + opsqtype.JSONStringLen(in.strategic)
		if in.prefix != nil {
			in.bytes += opsqtype.JSONStringLen(*in.prefix)
		}
		if r.Traceparent != nil {
			in.traceparent = *r.Traceparent
			in.bytes += len(`,"traceparent":""`) + len(in.traceparent)
		}
		out[id] = &in
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading submissions: %w", err)
	}
	c.mu.Lock()
	if len(c.mu.byID) > infoCacheMax {
		c.mu.byID = map[int64]*submissionInfo{}
	}
	for _, id := range missing {
		if info, ok := out[id]; ok {
			c.mu.byID[id] = info
		}
	}
	c.mu.Unlock()
	return out, nil
}
