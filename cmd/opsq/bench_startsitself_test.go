package main

import (
	"errors"
	"io"
	"testing"
	"time"

	"opsq/cmd/opsq/bench"
)

// TestParseBenchStartsItself: the schedules and dependencies workloads' flags default to
// DESIGN.md §6's sizes, take their values, start 3 instances for schedules unless told, and
// a bad one is a usage error.
func TestParseBenchStartsItself(t *testing.T) {
	t.Parallel()
	cfg, err := parseBenchArgs([]string{"--workload", "schedules,dependencies"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Instances != bench.ScheduleInstances || cfg.ScheduleDuration != time.Minute || cfg.ScheduleCount != 10_000 ||
		cfg.ScheduleIdlePeriod != time.Minute || cfg.ScheduleIdleDuration != 2*time.Minute || cfg.ScheduleIdleOverlap != "skip" ||
		cfg.DependencyChains != 5 || cfg.DependencyBacklog != 1_000_000 || cfg.DependencyWaiting != 1_000_000 {
		t.Errorf("defaults: %+v; want §6's sizes on 3 instances", cfg.Config)
	}
	cfg, err = parseBenchArgs([]string{"--workload", "schedules,dependencies", "--instances", "4", "--schedule-duration", "12s",
		"--schedule-count", "30", "--schedule-idle-period", "5s", "--schedule-idle-duration", "6s", "--schedule-idle-overlap", "allow",
		"--dependency-chains", "3", "--dependency-backlog", "20k", "--dependency-waiting", "1M"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Instances != 4 || cfg.ScheduleDuration != 12*time.Second || cfg.ScheduleCount != 30 || cfg.ScheduleIdlePeriod != 5*time.Second ||
		cfg.ScheduleIdleDuration != 6*time.Second || cfg.ScheduleIdleOverlap != "allow" ||
		cfg.DependencyChains != 3 || cfg.DependencyBacklog != 20_000 || cfg.DependencyWaiting != 1_000_000 {
		t.Errorf("every flag: %+v", cfg.Config)
	}
	for _, args := range [][]string{
		{"--workload", "schedules", "--instances", "2"},
		{"--workload", "schedules", "--schedule-idle-period", "7s"},
		{"--workload", "dependencies", "--dependency-backlog", "100"},
	} {
		if _, err := parseBenchArgs(args, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v; want a usage error", args, err)
		}
	}
}
