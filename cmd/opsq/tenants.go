package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"opsq/queuer"
	opsqsql "opsq/sql"
)

const tenantsUsage = `usage: opsq tenants set TENANT [--max-pending-chunks N|none] [--max-in-progress N|none]
       opsq tenants list [--json]

Tenants own submissions (DESIGN.md §8). set gives a tenant quotas: a submission that would
take the tenant past max_pending_chunks chunks not yet finished, or past max_in_progress
submissions in progress, is refused with 429 quota_exceeded. "none" is no limit; a flag
left out leaves that quota as it is (none for a new tenant). list shows every tenant that has quotas or work in progress, with what
it has. These commands talk to the database, not to an instance; the instances read the
quotas at each submission.

flags:`

func runTenants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tenants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, tenantsUsage)
		fs.PrintDefaults()
	}
	var dbURL, devDir, maxPending, maxInProgress string
	var asJSON bool
	envString(fs, &dbURL, "database-url", "OPSQ_DATABASE_URL", "", "PostgreSQL URL")
	envString(fs, &devDir, "dev-cluster", "OPSQ_DEV_CLUSTER", "", "use the local development cluster in this directory when no URL is set (make run's: .data/pg)")
	fs.StringVar(&maxPending, "max-pending-chunks", "", "set: the most chunks not yet finished over the tenant's submissions, or none (default: as it is)")
	fs.StringVar(&maxInProgress, "max-in-progress", "", "set: the most submissions in progress, or none (default: as it is)")
	fs.BoolVar(&asJSON, "json", false, "list: print JSON")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	usageError := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "opsq tenants: "+format+"\n\n", a...)
		fs.Usage()
		return errUsage
	}
	var set opsqsql.TenantSetParams
	switch {
	case len(pos) == 0:
		return usageError("missing action: set or list")
	case pos[0] == "set" && len(pos) == 2:
		if err := queuer.CheckTenant(pos[1]); err != nil {
			return usageError("%v", err)
		}
		set.Name = pos[1]
		set.KeepPending, set.KeepInProgress = maxPending == "", maxInProgress == ""
		var err error
		if set.MaxPendingChunks, err = parseQuota(maxPending); err != nil {
			return usageError("--max-pending-chunks %q: %v", maxPending, err)
		}
		if set.MaxInProgress, err = parseQuota(maxInProgress); err != nil {
			return usageError("--max-in-progress %q: %v", maxInProgress, err)
		}
	case pos[0] == "set":
		return usageError("set takes one tenant name")
	case pos[0] == "list" && len(pos) == 1:
	default:
		return usageError("unknown action or extra arguments: %q", pos)
	}
	pool, err := adminPool(ctx, "tenants", dbURL, devDir, stderr)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := opsqsql.New(pool)
	if pos[0] == "set" {
		r, err := db.TenantSet(ctx, set)
		if err != nil {
			return fmt.Errorf("setting the quotas of tenant %q: %w", set.Name, err)
		}
		fmt.Fprintf(stdout, "tenant %s: max_pending_chunks %s, max_in_progress %s\n", r.Name, quotaText(r.MaxPendingChunks), quotaText(r.MaxInProgress))
		return nil
	}
	rows, err := db.TenantsList(ctx)
	if err != nil {
		return fmt.Errorf("listing tenants: %w", err)
	}
	if asJSON {
		if rows == nil {
			rows = []opsqsql.TenantsListRow{}
		}
		type tenant struct {
			Name             string `json:"name"`
			MaxPendingChunks *int64 `json:"max_pending_chunks"`
			MaxInProgress    *int64 `json:"max_in_progress"`
			InProgress       int64  `json:"in_progress"`
			PendingChunks    int64  `json:"pending_chunks"`
		}
		out := make([]tenant, len(rows))
		for i, r := range rows {
			out[i] = tenant(r)
		}
		return printJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tIN PROGRESS\tMAX IN PROGRESS\tPENDING CHUNKS\tMAX PENDING CHUNKS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", r.Name, r.InProgress, quotaText(r.MaxInProgress), r.PendingChunks, quotaText(r.MaxPendingChunks))
	}
	return tw.Flush()
}

// parseQuota reads a quota flag: a count of 0 or more, or none (nil).
func parseQuota(s string) (*int64, error) {
	if s == "none" || s == "" { // "": kept, not read
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > 1<<31-1 {
		return nil, errors.New("want a count between 0 and 2147483647, or none")
	}
	return &n, nil
}

func quotaText(q *int64) string {
	if q == nil {
		return "none"
	}
	return strconv.FormatInt(*q, 10)
}
