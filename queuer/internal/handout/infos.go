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
// on a miss. Entries go when the submission finishes (NOTIFY) or is dropped (a cancel or
// a fail, at once); the whole cache is dropped when it grows past its bound. A read that
// a forget overtook is done again (get). Safe for concurrent use.
type infoCache struct {
	pool opsqsql.Pool
	// afterRead, if set, runs between a miss's read and what get does with it. For tests.
	afterRead func()
	mu        struct {
		sync.Mutex
		byID map[int64]*submissionInfo
		// forgets counts the calls of forget, so that a read begun before one is known.
		forgets uint64
	}
}

const (
	infoCacheMax = 100_000
	// infoRereads bounds the reads again of a miss that forgets kept overtaking; what the
	// last one read is answered, not cached.
	infoRereads = 2
)

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
	c.mu.forgets++
}

// get returns the infos of the candidates' submissions that are in progress.
//
// A miss is read from the database. A submission forgotten while that read ran (dropped
// by a cancel, or finished) may have been read as it was before: its info would then be
// cached, and its chunks a cancel by slices has not moved yet handed out, until the cache
// is dropped. So when any forget overtook the read it is read again, after the change the
// forget was for has committed (up to infoRereads times).
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
	forgets := c.mu.forgets
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	for reads := 0; ; reads++ {
		read, err := c.read(ctx, missing)
		if err != nil {
			return nil, err
		}
		if c.afterRead != nil {
			c.afterRead()
		}
		c.mu.Lock()
		if overtaken := c.mu.forgets != forgets; overtaken && reads < infoRereads {
			forgets = c.mu.forgets
			c.mu.Unlock()
			continue
		} else if !overtaken {
			if len(c.mu.byID) > infoCacheMax {
				c.mu.byID = map[int64]*submissionInfo{}
			}
			for id, info := range read {
				c.mu.byID[id] = info
			}
		}
		c.mu.Unlock()
		for id, info := range read {
			out[id] = info
		}
		return out, nil
	}
}

// read reads the infos of the submissions ids that are in progress.
func (c *infoCache) read(ctx context.Context, ids []int64) (map[int64]*submissionInfo, error) {
	out := make(map[int64]*submissionInfo, len(ids))
	err := opsqsql.New(c.pool).SubmissionInfo(ctx, opsqsql.SubmissionInfoParams{IDs: ids}, func(r opsqsql.SubmissionInfoRow) error {
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
	return out, nil
}
