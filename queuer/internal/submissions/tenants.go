package submissions

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	opsqsql "opsq/sql"
)

// Tenants (DESIGN.md §1 and §8): every submission belongs to one tenant, kept on its row
// in whichever table it is and under the strategic metadata key "@tenant"
// (migrations/00009_tenants.sql). A tenant's quotas are checked in the transaction of
// each of its submissions.

// TenantDefault is the tenant of a submission that names none, and of every submission
// made before tenants.
const TenantDefault = "default"

// TenantKey is the strategic metadata key that holds a submission's tenant: reserved,
// and a key of every strategy block that takes one ("@tenant").
const TenantKey = opsqsql.TenantKey

var tenantRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// CheckTenant reports whether name can name a tenant: 1 to 64 bytes of a-z, 0-9, '_'
// and '-'.
func CheckTenant(name string) error {
	if !tenantRE.MatchString(name) {
		return fmt.Errorf("tenant %q: want 1 to 64 characters of a-z, 0-9, '_' or '-'", name)
	}
	return nil
}

// QuotaError is a submission, or a retry, refused because it would take its tenant past a
// quota.
type QuotaError struct {
	Tenant string
	// Quota is "max_pending_chunks" or "max_in_progress".
	Quota string
	Limit int64
	// Have is what the tenant has now; Adding what the submission would add.
	Have, Adding int64
}

func (e *QuotaError) Error() string {
	what := "chunks pending"
	if e.Quota == "max_in_progress" {
		what = "submissions in progress"
	}
	return fmt.Sprintf("tenant %q has %d %s; %d more would pass its %s of %d", e.Tenant, e.Have, what, e.Adding, e.Quota, e.Limit)
}

// checkQuota refuses, in db's transaction, a submission of n pending chunks of tenant when it
// would take the tenant past one of its quotas. It locks the tenant's quota row until the
// transaction ends, so that the tenant's submissions are checked one after another; a
// tenant without a row has no quota and costs one probe.
func checkQuota(ctx context.Context, db opsqsql.Queries, tenant string, n int64) error {
	q, err := db.TenantLock(ctx, opsqsql.TenantParams{Tenant: tenant})
	if errors.Is(err, opsqsql.ErrNotFound) || (err == nil && q.MaxPendingChunks == nil && q.MaxInProgress == nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the quotas of tenant %q: %w", tenant, err)
	}
	// A statement of its own, after the lock: its snapshot sees the submissions that the
	// holder of the lock before us committed.
	u, err := db.TenantUsage(ctx, opsqsql.TenantParams{Tenant: tenant})
	if err != nil {
		return fmt.Errorf("counting what tenant %q has in progress: %w", tenant, err)
	}
	if q.MaxInProgress != nil && u.InProgress+1 > *q.MaxInProgress {
		return &QuotaError{Tenant: tenant, Quota: "max_in_progress", Limit: *q.MaxInProgress, Have: u.InProgress, Adding: 1}
	}
	if q.MaxPendingChunks != nil && u.PendingChunks+n > *q.MaxPendingChunks {
		return &QuotaError{Tenant: tenant, Quota: "max_pending_chunks", Limit: *q.MaxPendingChunks, Have: u.PendingChunks, Adding: n}
	}
	return nil
}

// quotaHold is a tenant's quota row locked in a transaction that is about to make its
// work grow by another way than a submit (a retry: a finished submission in progress
// again, failed or skipped chunks pending again), with what the tenant had before.
type quotaHold struct {
	tenant string
	limits opsqsql.TenantQuota
	before opsqsql.TenantUsageRow
}

// holdQuota locks tenant's quota row for the rest of db's transaction (as a submit does,
// so that the tenant's submits and retries are checked one after another) and reads what
// the tenant has; nil when the tenant has no quota (one probe).
func holdQuota(ctx context.Context, db opsqsql.Queries, tenant string) (*quotaHold, error) {
	q, err := db.TenantLock(ctx, opsqsql.TenantParams{Tenant: tenant})
	if errors.Is(err, opsqsql.ErrNotFound) || (err == nil && q.MaxPendingChunks == nil && q.MaxInProgress == nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the quotas of tenant %q: %w", tenant, err)
	}
	u, err := db.TenantUsage(ctx, opsqsql.TenantParams{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("counting what tenant %q has in progress: %w", tenant, err)
	}
	return &quotaHold{tenant: tenant, limits: q, before: u}, nil
}

// check reads again, after the transaction's change, what the tenant has, and refuses the
// change with a *QuotaError (the transaction then rolls back) when it grew past a quota:
// what a submit of the same work would get. A change that adds nothing is never refused,
// even to a tenant already past a quota lowered since. A nil hold checks nothing.
func (h *quotaHold) check(ctx context.Context, db opsqsql.Queries) error {
	if h == nil {
		return nil
	}
	u, err := db.TenantUsage(ctx, opsqsql.TenantParams{Tenant: h.tenant})
	if err != nil {
		return fmt.Errorf("counting what tenant %q has in progress: %w", h.tenant, err)
	}
	if add := u.InProgress - h.before.InProgress; add > 0 && h.limits.MaxInProgress != nil && u.InProgress > *h.limits.MaxInProgress {
		return &QuotaError{Tenant: h.tenant, Quota: "max_in_progress", Limit: *h.limits.MaxInProgress, Have: h.before.InProgress, Adding: add}
	}
	if add := u.PendingChunks - h.before.PendingChunks; add > 0 && h.limits.MaxPendingChunks != nil && u.PendingChunks > *h.limits.MaxPendingChunks {
		return &QuotaError{Tenant: h.tenant, Quota: "max_pending_chunks", Limit: *h.limits.MaxPendingChunks, Have: h.before.PendingChunks, Adding: add}
	}
	return nil
}

// tenantCacheMax bounds the tenants of submissions a Store remembers; past it, it forgets
// them all and starts again.
const tenantCacheMax = 100_000

// tenantCache remembers the tenants of submissions: a submission's tenant never changes,
// so an entry is never stale (a submission deleted by retention is unknown to every
// route anyway). Safe for concurrent use.
type tenantCache struct {
	mu   sync.Mutex
	byID map[int64]string
}

// TenantsOf returns the tenant of each of ids that exists, in any state; unknown ids are
// not in the map. Tenants already read are not read again.
func (s *Store) TenantsOf(ctx context.Context, ids []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(ids))
	var missing []int64
	s.tenants.mu.Lock()
	for _, id := range ids {
		if t, ok := s.tenants.byID[id]; ok {
			out[id] = t
		} else {
			missing = append(missing, id)
		}
	}
	s.tenants.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	rows, err := opsqsql.New(s.cfg.Pool).SubmissionTenants(ctx, opsqsql.SubmissionTenantsParams{IDs: missing})
	if err != nil {
		return nil, fmt.Errorf("reading the tenants of submissions: %w", err)
	}
	s.tenants.mu.Lock()
	defer s.tenants.mu.Unlock()
	if s.tenants.byID == nil || len(s.tenants.byID)+len(rows) > tenantCacheMax {
		s.tenants.byID = make(map[int64]string, len(rows))
	}
	for _, r := range rows {
		out[r.ID] = r.Tenant
		s.tenants.byID[r.ID] = r.Tenant
	}
	return out, nil
}

// TenantOf returns submission id's tenant, or ErrNotFound.
func (s *Store) TenantOf(ctx context.Context, id int64) (string, error) {
	m, err := s.TenantsOf(ctx, []int64{id})
	if err != nil {
		return "", err
	}
	t, ok := m[id]
	if !ok {
		return "", ErrNotFound
	}
	return t, nil
}

// TenantIn returns nil when submission id belongs to one of tenants, and ErrNotFound when
// it is unknown or of another tenant. The two misses cost the same work: a cached tenant
// answers only when it is one of tenants; any other id is read by one statement with the
// tenants in its WHERE clause, so that neither the answer nor the time it takes tells a
// caller that another tenant's id exists (issue 31, finding 10).
func (s *Store) TenantIn(ctx context.Context, id int64, tenants []string) error {
	s.tenants.mu.Lock()
	t, ok := s.tenants.byID[id]
	s.tenants.mu.Unlock()
	if ok && slices.Contains(tenants, t) {
		return nil
	}
	r, err := opsqsql.New(s.cfg.Pool).SubmissionTenantIn(ctx, opsqsql.SubmissionTenantInParams{ID: id, Tenants: tenants})
	if errors.Is(err, opsqsql.ErrNotFound) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("reading the tenant of submission %d: %w", id, err)
	}
	s.tenants.mu.Lock()
	defer s.tenants.mu.Unlock()
	if s.tenants.byID == nil || len(s.tenants.byID) >= tenantCacheMax {
		s.tenants.byID = make(map[int64]string)
	}
	s.tenants.byID[r.ID] = r.Tenant
	return nil
}
