package handout

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	opsqsql "opsq/sql"
)

// A reserve confined to some tenants (Request.Tenants, a consumer key's): its leaves' scans
// are filtered by tenant, the probe of opsq.strategic_metadata's primary key that a
// select_only makes ("@tenant" = the tenant), and buffered like any other scan. For a
// tenant with a fair share of the backlog that costs about nothing: a buffer fill reads
// about 1/share rows for each chunk it keeps, and most reserves take from the buffer
// (queuer/internal/handout/tenants_scale_test.go measures it: within 2× of an unlimited reserve at
// a 1 % share). It would cost a tenant whose chunks are rare (or none) a read of the whole
// backlog, so before scanning, the run reads the tenants' first submissions in progress
// (cached until new work arrives, at most tenantSubsTTL): none, and nothing is scanned;
// a few (fewSubmissions) holding few chunks (fewTenantChunks), and they are scanned one by
// one in chunk order, as select_only scans a rare value's.

const (
	// fewTenantChunks is the most chunks a few submissions of the tenants may hold to be
	// scanned one by one rather than through the filtered scans of the whole backlog.
	fewTenantChunks = 10_000
	// tenantSubsTTL bounds how long the tenants' submissions are remembered; new work
	// forgets them at once.
	tenantSubsTTL = time.Second
	// tenantSubsMax bounds the tenant lists remembered.
	tenantSubsMax = 1_000
)

// tenantSubs is what a reserve knows of its tenants' submissions in progress: the first
// fewSubmissions+1, oldest first, and the chunks they have not finished.
type tenantSubs struct {
	ids     []int64
	pending int64
	at      time.Time
}

// tenantSubsCache remembers tenantSubs by what was looked for (cachedSubs): a tenant
// list, a select_only value, a weighted_fair's others. Safe for concurrent use.
type tenantSubsCache struct {
	mu    sync.Mutex
	byKey map[string]tenantSubs
	gen   uint64 // moved on by clear: a read begun before is not kept
}

func newTenantSubsCache() *tenantSubsCache {
	return &tenantSubsCache{byKey: map[string]tenantSubs{}}
}

// clear forgets every tenant list: new work arrived.
func (c *tenantSubsCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.byKey)
}

// tenantSubmissions returns the first submissions in progress of tenants.
func (p *Path) tenantSubmissions(ctx context.Context, tenants []string) (tenantSubs, error) {
	key := strings.Join(tenants, ",")
	return p.cachedSubs("tenants "+key, func() (tenantSubs, error) {
		rows, err := opsqsql.New(p.cfg.Pool).TenantSubmissions(ctx, opsqsql.TenantSubmissionsParams{Tenants: tenants, Limit: fewSubmissions + 1})
		if err != nil {
			return tenantSubs{}, fmt.Errorf("reading the submissions of tenants %s: %w", key, err)
		}
		e := tenantSubs{ids: make([]int64, len(rows))}
		for i, r := range rows {
			e.ids[i] = r.ID
			e.pending += r.Pending
		}
		return e, nil
	})
}

// cachedSubs returns what load finds of the submissions in progress, remembered under key
// until new work arrives, at most tenantSubsTTL: the tenants' submissions, a select_only
// value's (matching) and those of a weighted_fair's others (fairOthers). A submission
// that finished since costs a scan that finds nothing; a new one clears the cache.
func (p *Path) cachedSubs(key string, load func() (tenantSubs, error)) (tenantSubs, error) {
	c := p.tenantSubs
	c.mu.Lock()
	e, ok := c.byKey[key]
	gen := c.gen
	c.mu.Unlock()
	if ok && time.Since(e.at) < tenantSubsTTL {
		return e, nil
	}
	e, err := load()
	if err != nil {
		return e, err
	}
	e.at = time.Now()
	c.mu.Lock()
	if c.gen == gen {
		if len(c.byKey) >= tenantSubsMax {
			clear(c.byKey)
		}
		c.byKey[key] = e
	}
	c.mu.Unlock()
	return e, nil
}
