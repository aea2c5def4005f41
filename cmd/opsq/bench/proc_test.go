package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"opsq/sql/pgtest"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// A command name may hold spaces and parentheses; utime (14) is 250 ticks, stime (15) 31.
	stat := "4242 (opsq (serve) x) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 31 0 0 20 0 12 0 100 1300000000 45000 18446744073709551615\n"
	if got, err := parseProcStat(stat); err != nil || got != 2810*time.Millisecond {
		t.Errorf("parseProcStat = %s, %v; want 2.81s", got, err)
	}
	for _, bad := range []string{"", "4242 (opsq) S 1 2 3", "4242 (opsq) S 1 4242 4242 0 -1 4194560 9000 0 0 0 x 31 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q): want an error", bad)
		}
	}
}

func TestProcCPU(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc/<pid>/stat is Linux's")
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel counts a tick more (10ms of CPU), within a margin for a busy box.
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		after, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
	}
	t.Errorf("CPU time still %s after 10s of spinning: want it to grow", before)
}

func TestParseProcStatus(t *testing.T) {
	t.Parallel()
	status := "Name:\topsq\nVmPeak:\t 1300000 kB\nVmHWM:\t  250000 kB\nVmRSS:\t  181234 kB\nThreads:\t12\n"
	for field, want := range map[string]int64{"VmRSS": 181234, "VmHWM": 250000} {
		if got, err := parseProcStatus(status, field); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", field, got, err, want)
		}
	}
	for _, field := range []string{"VmSwap", "Threads"} {
		if _, err := parseProcStatus(status, field); err == nil {
			t.Errorf("%s: want an error", field)
		}
	}
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	// A full line: ppid (4) 1, utime 250, stime 31, cutime (16) 7, cstime 3, starttime (22) 100.
	stat := "4242 (postgres) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 31 7 3 20 0 12 0 100 1300000000 45000 18446744073709551615\n"
	st, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if st.ppid != 1 || st.cpu != 2810*time.Millisecond || st.children != 100*time.Millisecond || st.started != 100 {
		t.Errorf("parseStat = %+v; want ppid 1, cpu 2.81s, children 100ms, started 100", st)
	}
}

func TestTreeCPU(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	own, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := treeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if tree < own {
		t.Errorf("treeCPU = %s; want at least the process's own %s", tree, own)
	}
}

func TestPGCostLocal(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	if os.Getenv(pgtest.EnvURL) != "" {
		t.Skipf("%s names a server that may not be on this machine", pgtest.EnvURL)
	}
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	c, err := newPGCost(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if !c.cpuMeasured() {
		t.Fatalf("the test server runs here, yet: %s", c.notLocal)
	}
	before, err := c.sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Work the server: CPU and WAL.
	if _, err := pool.Exec(ctx, "CREATE TABLE spent AS SELECT g, md5(g::text) FROM generate_series(1, 200000) AS g"); err != nil {
		t.Fatal(err)
	}
	spent, err := c.since(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	if spent.cpu <= 0 || spent.wal < 1<<20 {
		t.Errorf("spent %s of CPU and %d bytes of WAL writing 200 000 rows; want some CPU and over 1 MiB", spent.cpu, spent.wal)
	}
}

func TestFindPostmasterNotLocal(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	// This process's parent did not start an hour from now: it is no postmaster.
	if pid, why := findPostmaster(os.Getpid(), time.Now().Add(time.Hour)); pid != 0 || !strings.Contains(why, "not local") {
		t.Errorf("findPostmaster of this process = %d, %q; want 0 and why the server is not local", pid, why)
	}
	if pid, why := findPostmaster(1<<30, time.Now()); pid != 0 || !strings.Contains(why, "not local") {
		t.Errorf("findPostmaster of no process = %d, %q; want 0 and why the server is not local", pid, why)
	}
}
