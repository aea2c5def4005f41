package main

import (
	"errors"
	"strings"
	"testing"

	"opsq/sql/pgtest"
)

// tenantsCLI runs "opsq tenants" with args on dbURL and returns its stdout and stderr.
func tenantsCLI(t *testing.T, dbURL string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := runTenants(t.Context(), append(args, "--database-url", dbURL), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// TestTenantsAndKeysCommands: "opsq keys create" gives a producer key its tenant and a
// consumer key its tenants, refusing them to the other roles; "opsq tenants set" sets a
// tenant's quotas and "list" shows them.
func TestTenantsAndKeysCommands(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.NewDB(t)
	createKey(t, dbURL, "acme-producer", "producer", "--tenant", "acme")
	createKey(t, dbURL, "acme-consumer", "consumer", "--tenants", "acme,globex")
	createKey(t, dbURL, "any-consumer", "consumer")
	for _, bad := range [][]string{
		{"--role", "consumer", "--tenant", "acme"},
		{"--role", "producer", "--tenants", "acme"},
		{"--role", "admin", "--tenant", "acme"},
		{"--role", "producer", "--tenant", "Acme!"},
		{"--role", "consumer", "--tenants", "acme,,globex"},
	} {
		if _, _, err := keysCLI(t, dbURL, append([]string{"create", "--name", "bad"}, bad...)...); err == nil {
			t.Errorf("opsq keys create %v: no error; want one", bad)
		}
	}
	out, _, err := keysCLI(t, dbURL, "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TENANTS", "acme-producer  producer  acme ", "acme-consumer  consumer  acme,globex", "any-consumer   consumer  all"} {
		if !strings.Contains(out, want) {
			t.Errorf("opsq keys list:\n%s\nwant it to show %q", out, want)
		}
	}

	if out, errOut, err := tenantsCLI(t, dbURL, "set", "acme", "--max-pending-chunks", "1000", "--max-in-progress", "5"); err != nil || !strings.Contains(out, "max_pending_chunks 1000, max_in_progress 5") {
		t.Fatalf("opsq tenants set: %v\n%s%s", err, out, errOut)
	}
	if _, _, err := tenantsCLI(t, dbURL, "set", "globex", "--max-in-progress", "2"); err != nil {
		t.Fatal(err)
	}
	// A flag left out keeps its quota; none removes it.
	if out, _, err := tenantsCLI(t, dbURL, "set", "acme", "--max-in-progress", "none"); err != nil || !strings.Contains(out, "max_pending_chunks 1000, max_in_progress none") {
		t.Errorf("opsq tenants set acme --max-in-progress none: %v, %q; want max_pending_chunks kept at 1000", err, out)
	}
	if _, _, err := tenantsCLI(t, dbURL, "set", "acme", "--max-in-progress", "5"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tenantsCLI(t, dbURL, "set", "acme", "--max-in-progress", "-1"); !errors.Is(err, errUsage) {
		t.Errorf("opsq tenants set --max-in-progress -1: %v; want a usage error", err)
	}
	out, _, err = tenantsCLI(t, dbURL, "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "acme ") || !strings.Contains(lines[1], "1000") || !strings.HasPrefix(lines[2], "globex ") || !strings.Contains(lines[2], "none") {
		t.Errorf("opsq tenants list:\n%s\nwant acme (5, 1000) and globex (2, none)", out)
	}
}
