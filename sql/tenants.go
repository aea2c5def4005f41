package sql

import (
	"context"
	_ "embed"

	"github.com/jackc/pgx/v5"
)

// Tenants (migrations/00009_tenants.sql): quotas, usage, and which tenant a submission
// belongs to.

// TenantKey is the reserved strategic metadata key under which opsq.strategic_metadata
// holds each submission's tenant (a JSON string): what a reserve's tenant filter and the
// strategy key "@tenant" probe.
const TenantKey = "@tenant"

//go:embed tenant_lock.sql
var tenantLock string

// TenantParams name a tenant.
type TenantParams struct {
	Tenant string
}

// TenantQuota is a tenant's quotas; nil: no limit.
type TenantQuota struct {
	MaxPendingChunks *int64 `db:"max_pending_chunks"`
	MaxInProgress    *int64 `db:"max_in_progress"`
}

// TenantLock locks the tenant's quota row until the end of the transaction and returns
// its quotas; ErrNotFound when the tenant has no row (no quota, nothing locked).
func (q Queries) TenantLock(ctx context.Context, p TenantParams) (TenantQuota, error) {
	return collectOne[TenantQuota](ctx, q.db, tenantLock, pgx.NamedArgs{"tenant": p.Tenant})
}

//go:embed tenant_usage.sql
var tenantUsage string

// TenantUsageRow is what a tenant has in progress.
type TenantUsageRow struct {
	InProgress    int64 `db:"in_progress"`
	PendingChunks int64 `db:"pending_chunks"`
}

// TenantUsage counts the tenant's submissions in progress and their unfinished chunks.
func (q Queries) TenantUsage(ctx context.Context, p TenantParams) (TenantUsageRow, error) {
	return collectOne[TenantUsageRow](ctx, q.db, tenantUsage, pgx.NamedArgs{"tenant": p.Tenant})
}

//go:embed tenant_set.sql
var tenantSet string

// TenantSetParams are tenant_set.sql's.
type TenantSetParams struct {
	Name             string
	MaxPendingChunks *int64 // nil: no limit
	MaxInProgress    *int64 // nil: no limit
	// KeepPending and KeepInProgress leave that quota as it is.
	KeepPending, KeepInProgress bool
}

// TenantRow is a row of opsq.tenants.
type TenantRow struct {
	Name             string `db:"name"`
	MaxPendingChunks *int64 `db:"max_pending_chunks"`
	MaxInProgress    *int64 `db:"max_in_progress"`
}

// TenantSet sets a tenant's quotas and returns its row.
func (q Queries) TenantSet(ctx context.Context, p TenantSetParams) (TenantRow, error) {
	return collectOne[TenantRow](ctx, q.db, tenantSet, pgx.NamedArgs{
		"name": p.Name, "max_pending_chunks": p.MaxPendingChunks, "max_in_progress": p.MaxInProgress,
		"keep_pending": p.KeepPending, "keep_in_progress": p.KeepInProgress,
	})
}

//go:embed tenants_list.sql
var tenantsList string

// TenantsListRow is a tenant, its quotas and its usage.
type TenantsListRow struct {
	Name             string `db:"name"`
	MaxPendingChunks *int64 `db:"max_pending_chunks"`
	MaxInProgress    *int64 `db:"max_in_progress"`
	InProgress       int64  `db:"in_progress"`
	PendingChunks    int64  `db:"pending_chunks"`
}

// TenantsList reads every tenant with a quota row or a submission in progress, by name.
// It has no parameters.
func (q Queries) TenantsList(ctx context.Context) ([]TenantsListRow, error) {
	return collect[TenantsListRow](ctx, q.db, tenantsList, nil)
}

//go:embed submission_tenants.sql
var submissionTenants string

// SubmissionTenantsParams are submission_tenants.sql's.
type SubmissionTenantsParams struct {
	IDs []int64
}

// SubmissionTenantsRow is a submission's tenant.
type SubmissionTenantsRow struct {
	ID     int64  `db:"id"`
	Tenant string `db:"tenant"`
}

// SubmissionTenants reads the tenants of submissions p.IDs, in any state; unknown ids
// are left out.
func (q Queries) SubmissionTenants(ctx context.Context, p SubmissionTenantsParams) ([]SubmissionTenantsRow, error) {
	return collect[SubmissionTenantsRow](ctx, q.db, submissionTenants, pgx.NamedArgs{"ids": p.IDs})
}

//go:embed submission_tenant_in.sql
var submissionTenantIn string

// SubmissionTenantInParams are submission_tenant_in.sql's.
type SubmissionTenantInParams struct {
	ID      int64
	Tenants []string
}

// SubmissionTenantIn reads submission p.ID's tenant when it is one of p.Tenants, in any
// state; ErrNotFound when the id is unknown or of another tenant, the two alike.
func (q Queries) SubmissionTenantIn(ctx context.Context, p SubmissionTenantInParams) (SubmissionTenantsRow, error) {
	return collectOne[SubmissionTenantsRow](ctx, q.db, submissionTenantIn, pgx.NamedArgs{"id": p.ID, "tenants": p.Tenants})
}

//go:embed tenant_submissions.sql
var tenantSubmissions string

// TenantSubmissionsParams are tenant_submissions.sql's.
type TenantSubmissionsParams struct {
	Tenants []string
	Limit   int
}

// TenantSubmissionsRow is a submission in progress and its chunks not yet finished.
type TenantSubmissionsRow struct {
	ID      int64 `db:"id"`
	Pending int64 `db:"pending"`
}

// TenantSubmissions reads the first in-progress submissions of p.Tenants, oldest first, at
// most p.Limit.
func (q Queries) TenantSubmissions(ctx context.Context, p TenantSubmissionsParams) ([]TenantSubmissionsRow, error) {
	if OnCitus() {
		return q.tenantSubmissionsCitus(ctx, p)
	}
	return collect[TenantSubmissionsRow](ctx, q.db, tenantSubmissions, pgx.NamedArgs{"tenants": p.Tenants, "limit": p.Limit})
}
