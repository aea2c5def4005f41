package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What PostgreSQL spends on a workload (DESIGN.md §6: what bounds a whole cluster): the
// CPU time of the server's processes, from /proc when the server runs on this machine, and
// the WAL it writes, from pg_current_wal_insert_lsn. Both are the whole server's: whatever
// else runs on it during the sample counts too.

// pgCost samples the server of a pool. It is safe for concurrent use.
type pgCost struct {
	pool *pgxpool.Pool
	// postmaster is the pid of the server's postmaster on this machine; 0 when the CPU
	// is not measured, for the reason in notLocal.
	postmaster int
	notLocal   string
}

// pgSample is one sample of the server's counters.
type pgSample struct {
	cpu time.Duration // of the postmaster and all its processes; 0 when not measured
	lsn string        // pg_current_wal_insert_lsn
}

// pgSpent is what the server spent between two samples.
type pgSpent struct {
	cpu time.Duration
	wal int64 // bytes
}

// newPGCost finds the server's postmaster on this machine, if it runs here.
func newPGCost(ctx context.Context, pool *pgxpool.Pool) (*pgCost, error) {
	c := &pgCost{pool: pool}
	var backend int
	var started time.Time
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid(), pg_postmaster_start_time()").Scan(&backend, &started); err != nil {
		return nil, fmt.Errorf("reading PostgreSQL's pids: %w", err)
	}
	c.postmaster, c.notLocal = findPostmaster(backend, started)
	return c, nil
}

// findPostmaster returns the pid of the postmaster on this machine whose backend is
// process backend and which started at started, or 0 and why there is none: the parent of
// the backend, if it started then (to the second), is it.
func findPostmaster(backend int, started time.Time) (int, string) {
	st, err := readStat(backend)
	if err != nil {
		return 0, fmt.Sprintf("PostgreSQL's backend, process %d there, is not a process of this machine (%v): the server is not local", backend, err)
	}
	pm, err := readStat(st.ppid)
	if err != nil {
		return 0, fmt.Sprintf("the parent of PostgreSQL's backend %d cannot be read: %v", backend, err)
	}
	boot, err := bootTime()
	if err != nil {
		return 0, fmt.Sprintf("the boot time cannot be read: %v", err)
	}
	here := boot.Add(time.Duration(pm.started) * time.Second / userHZ)
	if d := here.Sub(started); d < -2*time.Second || d > 2*time.Second {
		return 0, fmt.Sprintf("process %d here started at %s, PostgreSQL's postmaster at %s: the server is not local",
			st.ppid, here.Format(time.RFC3339), started.Format(time.RFC3339))
	}
	return st.ppid, ""
}

// cpuMeasured reports whether samples hold the server's CPU time.
func (c *pgCost) cpuMeasured() bool { return c.postmaster != 0 }

// sample reads the server's counters.
func (c *pgCost) sample(ctx context.Context) (pgSample, error) {
	var s pgSample
	if err := c.pool.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&s.lsn); err != nil {
		return s, fmt.Errorf("reading the WAL position: %w", err)
	}
	if c.cpuMeasured() {
		cpu, err := treeCPU(c.postmaster)
		if err != nil {
			return s, fmt.Errorf("reading PostgreSQL's CPU time: %w", err)
		}
		s.cpu = cpu
	}
	return s, nil
}

// since returns what the server spent since before.
func (c *pgCost) since(ctx context.Context, before pgSample) (pgSpent, error) {
	after, err := c.sample(ctx)
	if err != nil {
		return pgSpent{}, err
	}
	var wal int64
	if err := c.pool.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", after.lsn, before.lsn).Scan(&wal); err != nil {
		return pgSpent{}, fmt.Errorf("measuring the WAL written: %w", err)
	}
	return pgSpent{cpu: after.cpu - before.cpu, wal: wal}, nil
}

// perItem returns what the server spent per item: CPU in µs, WAL in bytes.
func (s pgSpent) perItem(n int64) (cpuMicros, walBytes float64) {
	if n <= 0 {
		return 0, 0
	}
	return float64(s.cpu.Microseconds()) / float64(n), float64(s.wal) / float64(n)
}
