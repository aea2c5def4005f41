package pglocal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A primary and its streaming standby, for the failover tests (DESIGN.md §4, "Failover of
// PostgreSQL"): InitStandby copies a running cluster into a new one that follows it, Kill
// ends a server as a crashed host would, Promote makes a standby the primary.
//
// For nothing acknowledged to be lost when the primary dies, the primary waits for the
// standby at each commit: give it synchronous_commit = on and synchronous_standby_names
// naming the standby in its Settings (a cluster that is not Durable turns
// synchronous_commit off unless Settings says otherwise). The standby must not list
// itself there: once promoted, it would wait at each commit for a standby it does not
// have.

// InitStandby creates s as a streaming standby of primary, which must run: where Init
// would run initdb, it copies primary with pg_basebackup -R (which writes standby.signal
// and the connection to primary into the copy), so that s, once started, replays
// primary's WAL as it is written and accepts read-only sessions. name is the standby's
// application_name on primary: what primary's synchronous_standby_names lists to wait for
// it. s's own Settings apply at its Start, not primary's. s.Dir may exist but must not
// hold a cluster yet.
func (s *Cluster) InitStandby(ctx context.Context, primary *Cluster, name string) error {
	if err := s.prepare(); err != nil {
		return err
	}
	if s.Initialized() {
		return fmt.Errorf("making a standby in %s: already holds a cluster", s.dir)
	}
	if primary.Port == 0 {
		return fmt.Errorf("making a standby in %s: the primary has no port (start it first)", s.dir)
	}
	if err := s.mkdir(s.dir); err != nil {
		return err
	}
	if err := s.makeTraversable(s.dir); err != nil {
		return err
	}
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s",
		primary.Port, quoteConninfo(name))
	// -c fast: a checkpoint at once rather than spread over checkpoint_timeout.
	args := []string{"-D", s.DataDir(), "-d", conninfo, "-R", "-X", "stream", "-c", "fast"}
	if !s.Durable {
		args = append(args, "--no-sync")
	}
	if _, err := s.run(ctx, "pg_basebackup", args...); err != nil {
		return fmt.Errorf("making a standby of the cluster on port %d in %s: %w", primary.Port, s.dir, err)
	}
	return nil
}

// binary returns the path of PostgreSQL program name: in BinDir, else beside the file
// BinDir's pg_ctl links to (a PATH directory may link the server binaries alone, as
// /usr/local/bin does on these machines, while pg_basebackup stays in
// /usr/lib/postgresql/15/bin).
func (c *Cluster) binary(name string) string {
	path := filepath.Join(c.BinDir, name)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(c.BinDir, "pg_ctl")); err == nil {
		if beside := filepath.Join(filepath.Dir(real), name); beside != path {
			if _, err := os.Stat(beside); err == nil {
				return beside
			}
		}
	}
	return path
}

// quoteConninfo quotes a value of a libpq connection string.
func quoteConninfo(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// Promote ends the recovery of a running standby (pg_ctl promote) and waits until it is a
// primary, which accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	if err := c.prepare(); err != nil {
		return err
	}
	if _, err := c.run(ctx, "pg_ctl", "promote", "-D", c.DataDir(), "-w", "-t", "60"); err != nil {
		return fmt.Errorf("promoting the standby in %s: %w", c.dir, err)
	}
	return nil
}

// Kill ends the server at once, as a crash of its host would: SIGKILL to the postmaster
// (its pid read from postmaster.pid) and to every process it started (backends, WAL
// sender and writer, checkpointer), so that no session outlives it and nothing more is
// written or streamed. No shutdown checkpoint is made and no session is told: clients see
// their connections break. It returns once the postmaster is gone; a later Start recovers
// from the WAL. Killing a cluster that does not run does nothing. Linux only (it finds the
// postmaster's children in /proc).
func (c *Cluster) Kill(ctx context.Context) error {
	if err := c.prepare(); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(c.DataDir(), "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("killing PostgreSQL in %s: %w", c.dir, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return fmt.Errorf("killing PostgreSQL in %s: postmaster.pid starts with %q, not a pid", c.dir, first)
	}
	if !c.isPostmaster(pid) {
		return nil // a stale pid file: the server already ended (its pid may be another's now)
	}
	// Stopped, the postmaster forks no new child while its children are listed; each
	// child is in a session of its own, so they are found by parent, not by group.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("killing PostgreSQL in %s: stopping postmaster %d: %w", c.dir, pid, err)
	}
	children, err := childrenOf(pid)
	if err != nil {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		return fmt.Errorf("killing PostgreSQL in %s: %w", c.dir, err)
	}
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL) // one that just exited is gone anyway
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing PostgreSQL in %s: postmaster %d: %w", c.dir, pid, err)
	}
	// pg_ctl status (Running, Stop) takes a pid that still exists, even as a zombie not
	// yet reaped, for a running server: wait until it is reaped.
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("killing PostgreSQL in %s: postmaster %d still exists 30s after SIGKILL (a zombie nobody reaps?)", c.dir, pid)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("killing PostgreSQL in %s: waiting for postmaster %d to be gone: %w", c.dir, pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// isPostmaster reports whether pid is a live postgres process working in this cluster's
// data directory (a pid read from a stale postmaster.pid may be another process's now,
// even another cluster's postgres).
func (c *Cluster) isPostmaster(pid int) bool {
	comm, state, _, ok := procStat(pid)
	if !ok || comm != "postgres" || state == 'Z' {
		return false
	}
	cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
	if err != nil {
		return false
	}
	data, err := filepath.EvalSymlinks(c.DataDir())
	return err == nil && cwd == data
}

// procStat is what /proc/<pid>/stat says of a process: its command name, state letter (R,
// S, Z…) and parent; ok false when it cannot be read (no such process, or no /proc).
func procStat(pid int) (comm string, state byte, ppid int, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, 0, false
	}
	// "pid (comm) S ppid …"; comm may hold spaces and parentheses, the last ')' ends it.
	open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	fields := strings.Fields(string(b[end+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return "", 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return string(b[open+1 : end]), fields[0][0], ppid, true
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, ppid, ok := procStat(p); ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out, nil
}
