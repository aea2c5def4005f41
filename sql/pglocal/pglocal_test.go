package pglocal_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"opsq/sql/pglocal"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// stopAtCleanup stops c when the test ends, whatever happened.
func stopAtCleanup(t *testing.T, c *pglocal.Cluster) {
	t.Helper()
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Errorf("stopping cluster: %v", err)
		}
	})
}

// show returns the value of a server setting, connecting to url.
func show(t *testing.T, url, setting string) string {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&v); err != nil {
		t.Fatalf("reading setting %s: %v", setting, err)
	}
	return v
}

func TestBinDir(t *testing.T) {
	t.Parallel()
	dir, err := pglocal.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("BinDir() = %s; want a directory holding %s: %v", dir, name, err)
		}
	}
}

func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := &pglocal.Cluster{Dir: t.TempDir(), Settings: map[string]string{"cluster_name": "opsq's test"}}
	if err := c.Init(ctx); err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, c)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Port == 0 {
		t.Fatal("Port = 0 after Start; want the port it chose")
	}
	if running, err := c.Running(ctx); err != nil || !running {
		t.Fatalf("Running() = %v, %v after Start; want true", running, err)
	}

	for setting, want := range map[string]string{
		"fsync":              "off",
		"synchronous_commit": "off",
		"full_page_writes":   "off",
		"max_connections":    "200",
		"listen_addresses":   "127.0.0.1",
		"cluster_name":       "opsq's test",
		"server_encoding":    "UTF8",
	} {
		if got := show(t, c.URL("postgres"), setting); got != want {
			t.Errorf("%s = %q; want %q", setting, got, want)
		}
	}
	// The unix socket answers too.
	if got := show(t, "host="+c.SocketDir()+" port="+strconv.Itoa(c.Port)+" user=postgres dbname=postgres", "port"); got != strconv.Itoa(c.Port) {
		t.Errorf("port over the unix socket = %s; want %d", got, c.Port)
	}

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if running, err := c.Running(ctx); err != nil || running {
		t.Fatalf("Running() = %v, %v after Stop; want false", running, err)
	}
	if err := c.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v; want nil", err)
	}
	if err := c.Init(ctx); err == nil {
		t.Error("Init of an existing cluster succeeded; want an error")
	}
}

// A directory too deep for a unix socket path gets its socket in a short directory.
func TestClusterLongDir(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	c := &pglocal.Cluster{Dir: dir}
	if err := c.Init(ctx); err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, c)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.SocketDir(); len(got) > 40 {
		t.Errorf("SocketDir() = %s; want a short path", got)
	}
	if got := show(t, "host="+c.SocketDir()+" port="+strconv.Itoa(c.Port)+" user=postgres dbname=postgres", "port"); got != strconv.Itoa(c.Port) {
		t.Errorf("port over the unix socket = %s; want %d", got, c.Port)
	}
}

// A server that cannot start says why, from its log.
func TestClusterStartFailureShowsLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := &pglocal.Cluster{Dir: t.TempDir(), Settings: map[string]string{"shared_buffers": "lots"}}
	if err := c.Init(ctx); err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, c)
	err := c.Start(ctx)
	if err == nil {
		t.Fatal("Start with shared_buffers = lots succeeded; want an error")
	}
	if !strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) {
		t.Errorf("Start error = %v; want the server log's complaint about shared_buffers", err)
	}
}

func TestEnsureDev(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "pg")

	first, err := pglocal.EnsureDev(ctx, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, first)
	started := startTime(t, first.URL("postgres"))
	if got := show(t, first.URL("postgres"), "fsync"); got != "on" {
		t.Errorf("fsync = %s; want on in the development cluster", got)
	}
	if got := show(t, first.URL("postgres"), "shared_buffers"); got != "256MB" {
		t.Errorf("shared_buffers = %s; want 256MB", got)
	}

	// A running cluster is reused.
	second, err := pglocal.EnsureDev(ctx, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if second.Port != first.Port {
		t.Errorf("second EnsureDev port = %d; want %d", second.Port, first.Port)
	}
	if got := startTime(t, second.URL("postgres")); !got.Equal(started) {
		t.Errorf("server started at %v after the second EnsureDev; want the same server, started at %v", got, started)
	}

	// A stopped cluster is started again, on its recorded port.
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := pglocal.EnsureDev(ctx, dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if third.Port != first.Port {
		t.Errorf("EnsureDev after Stop port = %d; want the recorded %d", third.Port, first.Port)
	}
	if got := startTime(t, third.URL("postgres")); !got.After(started) {
		t.Errorf("server started at %v after a restart; want after %v", got, started)
	}
}

func startTime(t *testing.T, url string) time.Time {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var at time.Time
	if err := conn.QueryRow(ctx, "SELECT pg_postmaster_start_time()").Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}
