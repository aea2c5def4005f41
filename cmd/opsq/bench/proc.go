package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Readers of /proc (Linux): the load average, a process's memory and CPU time, and the
// processes of a PostgreSQL server. Elsewhere they return errors, or "" for the load.

// loadAverage returns the 1, 5 and 15 minute load averages, such as "4.92 3.25 1.99", or
// "" where /proc/loadavg does not exist.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procStatusKB returns a field in kB of /proc/<pid>/status, such as VmRSS.
func procStatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of process %d: %w", pid, err)
	}
	return parseProcStatus(string(b), field)
}

// parseProcStatus returns field, such as VmRSS, of the text of /proc/<pid>/status, in kB.
func parseProcStatus(status, field string) (int64, error) {
	for line := range strings.Lines(status) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: unexpected value %q", field, strings.TrimSpace(value))
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/<pid>/status", field)
}

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on Linux.
const userHZ = 100

// procCPU returns the CPU time process pid used so far, user and system, from
// /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return parseProcStat(string(b))
}

// parseProcStat returns the user and system CPU time of the text of /proc/<pid>/stat.
func parseProcStat(stat string) (time.Duration, error) {
	st, err := parseStat(stat)
	return st.cpu, err
}

// procStat is what the bench reads of /proc/<pid>/stat.
type procStat struct {
	ppid     int
	cpu      time.Duration // user and system (utime, stime)
	children time.Duration // of its children that have exited and been waited for (cutime, cstime)
	started  int64         // starttime: clock ticks after boot
}

// readStat reads /proc/<pid>/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

// parseStat parses the text of /proc/<pid>/stat.
func parseStat(stat string) (procStat, error) {
	i := strings.LastIndexByte(stat, ')') // the command name, before it, may hold spaces
	if i < 0 {
		return procStat{}, fmt.Errorf("unexpected /proc/<pid>/stat %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state): ppid is field 4, utime 14, starttime 22
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("unexpected /proc/<pid>/stat %q", stat)
	}
	field := func(n int) (int64, error) { // the n-th field of stat, counted from 1
		if n-3 >= len(f) {
			return 0, fmt.Errorf("unexpected /proc/<pid>/stat %q", stat)
		}
		v, err := strconv.ParseInt(f[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/<pid>/stat %q", stat)
		}
		return v, nil
	}
	var st procStat
	ticks := func(fields ...int) (time.Duration, error) {
		var sum int64
		for _, n := range fields {
			v, err := field(n)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return time.Duration(sum) * time.Second / userHZ, nil
	}
	var err error
	if st.cpu, err = ticks(14, 15); err != nil {
		return st, err
	}
	// The other fields are missing from the short lines the tests write.
	if ppid, err := field(4); err == nil {
		st.ppid = int(ppid)
	}
	if len(f) >= 15 {
		st.children, _ = ticks(16, 17)
	}
	if len(f) >= 20 {
		st.started, _ = field(22)
	}
	return st, nil
}

// bootTime returns when the machine booted, from the btime line of /proc/stat.
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("/proc/stat: btime %q", v)
			}
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("/proc/stat has no btime")
}

// treeCPU returns the CPU time process pid and its children used so far: its own, that of
// its children that have exited (it waited for them), and that of the live ones. A
// PostgreSQL postmaster's children are every process of the server.
//
// A child that the process waits for while its children are being read would be counted
// twice (read alive, then in its parent's total) or not at all: when the parent's total of
// its waited-for children changes during the reading, it is read again.
func treeCPU(pid int) (time.Duration, error) {
	for range treeCPUAttempts - 1 {
		if total, stable, err := readTreeCPU(pid); err != nil || stable {
			return total, err
		}
	}
	total, _, err := readTreeCPU(pid)
	return total, err
}

// treeCPUAttempts bounds the readings of treeCPU; the last is taken as it is.
const treeCPUAttempts = 20

// readTreeCPU reads the CPU time of pid and its children once, and whether none of its
// children was waited for meanwhile.
func readTreeCPU(pid int) (total time.Duration, stable bool, err error) {
	root, err := readStat(pid)
	if err != nil {
		return 0, false, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		st, err := readStat(child)
		if err != nil || st.ppid != pid {
			continue // gone since the listing, or not a child
		}
		total += st.cpu + st.children
	}
	again, err := readStat(pid)
	if err != nil {
		return 0, false, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	return total + again.cpu + again.children, again.children == root.children, nil
}
