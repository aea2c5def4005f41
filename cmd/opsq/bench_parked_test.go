package main

import (
	"os"
	"runtime"
	"testing"
	"time"
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
