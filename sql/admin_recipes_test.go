package sql_test

import (
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

// psqlExitStop is psql's exit status when ON_ERROR_STOP stopped a script at an error.
const psqlExitStop = 3

// TestAdminRecipesStopOnError: every recipe sets ON_ERROR_STOP before its first
// statement, so that psql stops at the first error and exits non-zero even when the
// operator forgot -v ON_ERROR_STOP=1.
func TestAdminRecipesStopOnError(t *testing.T) {
	t.Parallel()
	entries, err := fs.ReadDir(opsqsql.Admin, "admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		script, err := fs.ReadFile(opsqsql.Admin, "admin/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		set := false
		for line := range strings.Lines(string(script)) {
			line = strings.TrimSpace(line)
			if line == `\set ON_ERROR_STOP on` {
				set = true
				break
			}
			if line != "" && !strings.HasPrefix(line, "--") {
				break // the first statement
			}
		}
		if !set {
			t.Errorf(`%s: want \set ON_ERROR_STOP on before its first statement`, e.Name())
		}
	}
}

// recipe runs sql/admin/name with psql as an operator would, without -v ON_ERROR_STOP=1.
func recipe(t *testing.T, dbURL, name string, vars ...string) (string, error) {
	t.Helper()
	return pgtest.Psql(t, dbURL, filepath.Join("admin", name), vars...)
}

// TestAdminRecipesFailLoudly: a recipe asked to change what does not exist (an unknown
// instance, shard or key name) exits non-zero and says what it did not find, and a
// recipe whose statement fails exits non-zero at once; the same recipes on what exists
// exit 0.
func TestAdminRecipesFailLoudly(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	conn, err := pgx.Connect(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	// What exists: an instance, the shards 0-63, a key.
	if out, err := recipe(t, dbURL, "create_api_key.sql", "name=ci", "role=producer", "expires=never",
		"sha256="+strings.Repeat("ab", 32)); err != nil {
		t.Fatalf("create_api_key.sql: %v\n%s", err, out)
	}
	if _, err := conn.Exec(t.Context(), "INSERT INTO opsq.instances (id, node_id, advertise_url, heartbeat_at) VALUES ('opsq-1', 1, 'http://opsq-1', now())"); err != nil {
		t.Fatalf("adding an instance: %v", err)
	}

	for _, tc := range []struct {
		recipe  string
		known   []string // vars naming what exists
		unknown []string // vars naming what does not
		want    string   // in the error
	}{
		{"drain_instance.sql", []string{"instance=opsq-1"}, []string{"instance=opsq-9"}, `drain_instance.sql: no instance 'opsq-9'; nothing was drained`},
		{"undrain_instance.sql", []string{"instance=opsq-1"}, []string{"instance=opsq-9"}, `undrain_instance.sql: no instance 'opsq-9'; nothing was undrained`},
		{"disable_shard.sql", []string{"shard=5"}, []string{"shard=64"}, `disable_shard.sql: no shard 64; nothing was disabled`},
		{"enable_shard.sql", []string{"shard=5"}, []string{"shard=64"}, `enable_shard.sql: no shard 64; nothing was enabled`},
		{"force_release_shard.sql", []string{"shard=5"}, []string{"shard=-1"}, `force_release_shard.sql: no shard -1; nothing was released`},
		{"revoke_api_key.sql", []string{"name=ci"}, []string{"name=cj"}, `revoke_api_key.sql: no API key named 'cj'; nothing was revoked`},
	} {
		t.Run(tc.recipe, func(t *testing.T) {
			out, err := recipe(t, dbURL, tc.recipe, tc.unknown...)
			expectStopped(t, tc.recipe, out, err, tc.want)
			if out, err := recipe(t, dbURL, tc.recipe, tc.known...); err != nil {
				t.Errorf("%s %v: %v; want exit 0\n%s", tc.recipe, tc.known, err, out)
			}
		})
	}
	if out, err := recipe(t, dbURL, "disable_shard.sql", "shard=64"); !strings.Contains(out, "shards are numbered 0 to 63") {
		t.Errorf("disable_shard.sql of shard 64: %v\n%s\nwant the hint of the shards' numbers", err, out)
	}

	// A tenant's quotas: set, changed, and refused for a name that is no tenant's.
	for _, vars := range [][]string{{"tenant=acme", "max_pending_chunks=1000", "max_in_progress=none"}, {"tenant=acme", "max_pending_chunks=none", "max_in_progress=5"}} {
		if out, err := recipe(t, dbURL, "set_tenant_quota.sql", vars...); err != nil {
			t.Fatalf("set_tenant_quota.sql %v: %v\n%s", vars, err, out)
		}
	}
	var pending, inProgress *int64
	if err := conn.QueryRow(t.Context(), "SELECT max_pending_chunks, max_in_progress FROM opsq.tenants WHERE name = 'acme'").Scan(&pending, &inProgress); err != nil ||
		pending != nil || inProgress == nil || *inProgress != 5 {
		t.Errorf("acme's quotas after set_tenant_quota.sql: %v, %v, %v; want none and 5", pending, inProgress, err)
	}
	out, err := recipe(t, dbURL, "set_tenant_quota.sql", "tenant=Acme Corp", "max_pending_chunks=1", "max_in_progress=1")
	expectStopped(t, "set_tenant_quota.sql", out, err, "violates check constraint")

	// A statement that fails stops the recipe, and psql exits non-zero: here a duration that
	// does not parse, refused by the table's check.
	timings := []string{"renew_interval=2s", "soft_expiry=10 seconds", "hard_expiry=60s", "heartbeat_timeout=10s", "drain_timeout=60s"}
	out, err = recipe(t, dbURL, "set_timings.sql", timings...)
	expectStopped(t, "set_timings.sql", out, err, "violates check constraint")
}

// expectStopped checks that psql stopped at an error (exit status 3) that says want.
func expectStopped(t *testing.T, recipe, out string, err error, want string) {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != psqlExitStop {
		t.Errorf("%s: %v; want psql to stop at an error and exit %d\n%s", recipe, err, psqlExitStop, out)
	}
	if !strings.Contains(out, want) {
		t.Errorf("%s printed %q; want an error saying %q", recipe, out, want)
	}
}

// TestAdminLiftThrottle (issue 33): lift_throttle.sql lifts the throttles of key = value in
// every tenant, in one tenant, or the one of every tenant (tenant= empty), tells the
// instances by NOTIFY, and stops with an error naming what it did not find when nothing
// of it is in force.
func TestAdminLiftThrottle(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN opsq_throttles"); err != nil {
		t.Fatal(err)
	}
	q := opsqsql.New(conn)
	set := func(value string, tenants ...string) {
		t.Helper()
		if _, err := q.ThrottleSet(ctx, opsqsql.ThrottleSetParams{Key: "mode", Value: value, Tenants: tenants, ForMicros: 3_600_000_000, SetBy: "c1"}); err != nil {
			t.Fatal(err)
		}
	}
	inForce := func() []string {
		t.Helper()
		rows, err := q.ThrottlesLoad(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Value+"@"+r.Tenant)
		}
		slices.Sort(out)
		return out
	}
	told := func(what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := conn.WaitForNotification(wctx); err != nil {
			t.Errorf("%s: no NOTIFY opsq_throttles (%v); want the instances told", what, err)
		}
	}
	set(`"preview"`, "", "acme", "beta")
	set(`42`, "acme")

	out, err := recipe(t, dbURL, "lift_throttle.sql", "key=mode", `value="preview"`, "tenant=acme")
	if err != nil || !strings.Contains(out, "c1") {
		t.Fatalf("lift_throttle.sql in acme: %v\n%s\nwant the lifted throttle listed with its setter", err, out)
	}
	told("lifting acme's")
	if got, want := inForce(), []string{`"preview"@`, `"preview"@beta`, `42@acme`}; !slices.Equal(got, want) {
		t.Errorf("in force after lifting acme's \"preview\": %q; want %q", got, want)
	}
	if out, err := recipe(t, dbURL, "lift_throttle.sql", "key=mode", `value="preview"`, "tenant="); err != nil {
		t.Fatalf("lift_throttle.sql of every tenant's: %v\n%s", err, out)
	}
	told("lifting every tenant's")
	if out, err := recipe(t, dbURL, "lift_throttle.sql", "key=mode", "value=42"); err != nil {
		t.Fatalf("lift_throttle.sql in every tenant: %v\n%s", err, out)
	}
	told("lifting 42 in every tenant")
	if got, want := inForce(), []string{`"preview"@beta`}; !slices.Equal(got, want) {
		t.Errorf("in force after the lifts: %q; want %q", got, want)
	}
	out, err = recipe(t, dbURL, "lift_throttle.sql", "key=mode", "value=42")
	expectStopped(t, "lift_throttle.sql", out, err, "lift_throttle.sql: no throttle of mode = 42 in force; nothing was lifted")
	out, err = recipe(t, dbURL, "lift_throttle.sql", "key=mode", `value="preview"`, "tenant=acme")
	expectStopped(t, "lift_throttle.sql", out, err, `no throttle of mode = "preview" in force in tenant acme`)
}
