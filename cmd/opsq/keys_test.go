package main

import (
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// keysCLI runs "opsq keys" with args on dbURL and returns its stdout and stderr.
func keysCLI(t *testing.T, dbURL string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr strings.Builder
	err := runKeys(t.Context(), append(args, "--database-url", dbURL), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// createKey runs "opsq keys create" and returns the key it printed alone on its first line.
func createKey(t *testing.T, dbURL, name, role string, more ...string) string {
	t.Helper()
	out, errOut, err := keysCLI(t, dbURL, append([]string{"create", "--name", name, "--role", role}, more...)...)
	if err != nil {
		t.Fatalf("opsq keys create %s: %v\n%s", name, err, errOut)
	}
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, "opsq_") || strings.ContainsAny(first, " \t") || len(first) != len("opsq_")+43 {
		t.Fatalf("opsq keys create printed %q first; want the key alone", first)
	}
	return first
}

func TestKeysCommand(t *testing.T) { // not parallel: t.Setenv
	dbURL := pgtest.NewDB(t)
	key := createKey(t, dbURL, "ci", "producer", "--expires", "90d")
	createKey(t, dbURL, "forever", "metrics")
	out, _, err := keysCLI(t, dbURL, "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, key) || strings.Contains(out, key[5:20]) {
		t.Errorf("opsq keys list shows the key:\n%s", out)
	}
	for _, want := range []string{"NAME", "ci", "producer", "forever", "metrics", "active"} {
		if !strings.Contains(out, want) {
			t.Errorf("opsq keys list:\n%s\nwant it to mention %q", out, want)
		}
	}
	// The bootstrap of docker-compose.yml: a key from the environment, once.
	boot := "opsq_" + strings.Repeat("b", 43)
	t.Setenv("TEST_BOOTSTRAP_KEY", boot)
	for range 2 {
		out, errOut, err := keysCLI(t, dbURL, "create", "--name", "admin", "--role", "admin", "--from-env", "TEST_BOOTSTRAP_KEY", "--if-missing")
		if err != nil || out != "" || strings.Contains(errOut, boot) {
			t.Fatalf("opsq keys create --from-env --if-missing: %v; stdout %q, stderr %q; want nothing on stdout", err, out, errOut)
		}
	}
	var n int
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM opsq.api_keys WHERE name = 'admin' AND sha256 = sha256($1::bytea)", []byte(boot)).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d admin keys with the bootstrap key's hash, %v; want 1", n, err)
	}
	if _, _, err := keysCLI(t, dbURL, "create", "--name", "ci", "--role", "admin"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("creating ci again: %v; want an error saying it exists", err)
	}
	for _, args := range [][]string{
		{"create", "--name", "x", "--role", "root"},
		{"create", "--role", "admin"},
		{"create", "--name", "x", "--role", "admin", "--expires", "soon"},
		{"revoke"},
		{"frobnicate"},
	} {
		if _, _, err := keysCLI(t, dbURL, args...); !errors.Is(err, errUsage) {
			t.Errorf("opsq keys %q: %v; want a usage error", args, err)
		}
	}
	if out, _, err := keysCLI(t, dbURL, "revoke", "ci"); err != nil || !strings.Contains(out, "revoked") {
		t.Errorf("opsq keys revoke ci: %q, %v", out, err)
	}
	if _, _, err := keysCLI(t, dbURL, "revoke", "nobody"); err == nil {
		t.Error("revoking an unknown key succeeded")
	}
	if out, _, _ := keysCLI(t, dbURL, "list"); !strings.Contains(out, "revoked") {
		t.Errorf("opsq keys list after the revocation:\n%s\nwant ci revoked", out)
	}
}

// TestClusterWithKeys: two instances with OPSQ_AUTH=required. A reserve forwarded from one
// to the other, and an extend forwarded to the owner of the chunk's shard, work on the
// caller's key; a revoked key is refused by both within a second; the client commands take
// --key; and no key appears in the instances' logs (at debug level).
func TestClusterWithKeys(t *testing.T) {
	dbURL := pgtest.NewDB(t)
	keys := map[string]string{}
	for _, role := range []string{"admin", "producer", "consumer", "metrics"} {
		keys[role] = createKey(t, dbURL, "test-"+role, role)
	}
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = keys["admin"]
	insts := c.StartN(2)
	a, b := insts[0], insts[1]
	ctx := t.Context()
	as := func(inst *clustertest.Instance, role string) *client.Client {
		return client.New(inst.URL, client.WithHTTPClient(c.HTTP), client.WithKey(keys[role]))
	}

	// A submission whose chunk is on a shard of b; the others are cancelled by their
	// producer.
	var id string
	pgtest.WaitFor(t, 20*time.Second, "a submission on a shard of "+b.ID, func() string {
		created, err := as(a, "producer").Submit(ctx, wire.Submission{Chunks: []string{"x"}})
		if err != nil {
			t.Fatal(err)
		}
		var owner string
		err = c.Pool.QueryRow(ctx, `SELECT coalesce(sc.claimant, '') FROM opsq.chunks ch
			JOIN opsq.shard_claims sc ON sc.shard = ch.shard WHERE ch.submission_id = $1`, mustID(t, created.ID)).Scan(&owner)
		if err != nil {
			t.Fatal(err)
		}
		if owner == b.ID {
			id = created.ID
			return ""
		}
		if _, err := as(a, "producer").Cancel(ctx, created.ID); err != nil {
			t.Fatalf("the producer cancelling its own submission: %v", err)
		}
		return "on a shard of " + owner
	})

	// a has nothing of its own: it forwards the reserve to b, on the consumer's key.
	chunks, err := as(a, "consumer").Reserve(ctx, wire.ReserveRequest{Max: 1, Lease: "1m"})
	if err != nil || len(chunks) != 1 || chunks[0].SubmissionID != id {
		t.Fatalf("reserve on %s: %+v, %v; want the chunk of %s, forwarded from %s", a.ID, chunks, err, id, b.ID)
	}
	ext, err := as(a, "consumer").Extend(ctx, "2m", chunks[0].Token)
	if err != nil || len(ext) != 1 || ext[0].Status != wire.StatusExtended {
		t.Fatalf("extend on %s of a chunk of %s: %+v, %v; want extended", a.ID, b.ID, ext, err)
	}
	if _, err := as(a, "producer").Reserve(ctx, wire.ReserveRequest{Max: 1}); !isStatus(err, http.StatusForbidden) {
		t.Errorf("reserve with a producer key: %v; want 403", err)
	}
	if _, err := client.New(a.URL, client.WithHTTPClient(c.HTTP)).Reserve(ctx, wire.ReserveRequest{Max: 1}); !isStatus(err, http.StatusUnauthorized) {
		t.Errorf("reserve without a key: %v; want 401", err)
	}
	if res, err := as(b, "consumer").Complete(ctx, wire.Completion{Token: chunks[0].Token, Output: "done"}); err != nil || res[0].Status != wire.StatusCompleted {
		t.Fatalf("complete: %+v, %v", res, err)
	}

	// The client commands take --key (and OPSQ_KEY).
	var stdout, stderr strings.Builder
	if err := runStatus(ctx, []string{"--url", a.URL, "--key", keys["producer"], id}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "completed") {
		t.Errorf("opsq status --key: %v, %q %q", err, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if err := runList(ctx, []string{"--url", a.URL, "--key", keys["producer"], "--meta", "company_id=42"}, &stdout, &stderr); err != nil {
		t.Errorf("opsq list --key --meta: %v %q", err, stderr.String())
	}
	err = runStatus(ctx, []string{"--url", a.URL, id}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--key or OPSQ_KEY") {
		t.Errorf("opsq status without a key: %v; want advice to give --key or OPSQ_KEY", err)
	}

	// A revocation takes effect on both instances within a second.
	if _, errOut, err := keysCLI(t, dbURL, "revoke", "test-consumer"); err != nil {
		t.Fatalf("opsq keys revoke: %v %s", err, errOut)
	}
	took := pgtest.Eventually(t, time.Second, "both instances refusing the revoked key", func() bool {
		_, errA := as(a, "consumer").Reserve(ctx, wire.ReserveRequest{Max: 1})
		_, errB := as(b, "consumer").Reserve(ctx, wire.ReserveRequest{Max: 1})
		return isStatus(errA, http.StatusUnauthorized) && isStatus(errB, http.StatusUnauthorized)
	})
	t.Logf("the revocation took effect on both instances after %s", took)
	if _, err := as(b, "metrics").Cluster(ctx); !isStatus(err, http.StatusForbidden) {
		t.Errorf("GET /v1/cluster with a metrics key: %v; want 403", err)
	}

	// No key, nor its secret part, in the logs.
	for _, inst := range insts {
		log, err := os.ReadFile(inst.Proc.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "auth=required") {
			t.Errorf("%s's log does not say auth=required at start", inst.ID)
		}
		for role, key := range keys {
			if strings.Contains(string(log), key[len("opsq_"):]) {
				t.Errorf("%s's log holds the %s key", inst.ID, role)
			}
		}
	}
}

func isStatus(err error, status int) bool {
	var e *client.Error
	return errors.As(err, &e) && e.StatusCode == status
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeysWithoutDatabase: with no database configured, "opsq keys" says how to point it
// at one, "make run"'s included.
func TestKeysWithoutDatabase(t *testing.T) { // not parallel: t.Setenv
	t.Setenv("OPSQ_DATABASE_URL", "")
	t.Setenv("OPSQ_DEV_CLUSTER", "")
	for _, args := range [][]string{{"list"}, {"revoke", "ci"}, {"create", "--name", "ci", "--role", "producer"}} {
		var stdout, stderr strings.Builder
		err := runKeys(t.Context(), args, &stdout, &stderr)
		if err == nil {
			t.Fatalf("opsq keys %s with no database succeeded", strings.Join(args, " "))
		}
		for _, want := range []string{"no database", "--database-url", "OPSQ_DATABASE_URL", `"make run"`, "--dev-cluster .data/pg"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("opsq keys %s: %q; want it to say %q", strings.Join(args, " "), err, want)
			}
		}
	}
}
