package main

import (
	"flag"

	"opsq/cmd/opsq/bench"
)

// The flags of the schedules and dependencies workloads of "opsq bench" (work that starts
// itself, DESIGN.md §6), with their defaults, DESIGN.md §6's sizes.

// benchStartsItselfFlags defines the flags of the schedules and dependencies workloads on
// fs, into cfg.
func benchStartsItselfFlags(fs *flag.FlagSet, cfg *bench.Config) {
	fs.DurationVar(&cfg.ScheduleDuration, "schedule-duration", bench.ScheduleDurationDefault,
		"schedules: how long the schedule firing every second runs; instance 0 is SIGKILLed at a third of it, instance 1 SIGSTOPped from its half for a quarter of it (8s to 90s)")
	fs.IntVar(&cfg.ScheduleCount, "schedule-count", bench.ScheduleCountDefault,
		"schedules: `N` schedules on the idle cluster, 1 000 a tenant, created through the API")
	fs.DurationVar(&cfg.ScheduleIdlePeriod, "schedule-idle-period", bench.ScheduleIdlePeriodDefault,
		"schedules: each idle schedule is due once every period (whole seconds dividing a minute), schedule i at second i % period")
	fs.DurationVar(&cfg.ScheduleIdleDuration, "schedule-idle-duration", bench.ScheduleIdleDurationDefault,
		"schedules: how long the idle cluster's CPU is measured")
	fs.StringVar(&cfg.ScheduleIdleOverlap, "schedule-idle-overlap", bench.ScheduleIdleOverlapDefault,
		"schedules: the idle schedules' overlap, skip (with no consumer, each schedule's later runs are recorded skipped) or allow (every run submits)")
	fs.IntVar(&cfg.DependencyChains, "dependency-chains", bench.DependencyChainsDefault,
		"dependencies: `N` chains of 3 one-chunk submissions, each after the previous, whose children's start delays are timed")
	cfg.DependencyBacklog, cfg.DependencyWaiting = bench.DependencyBacklogDefault, bench.DependencyWaitingDefault // a countFlag's default is its value
	fs.Var((*countFlag)(&cfg.DependencyBacklog), "dependency-backlog", "dependencies: `N` chunks in the reservable backlog the reserves are timed on")
	fs.Var((*countFlag)(&cfg.DependencyWaiting), "dependency-waiting", "dependencies: `N` chunks of a child waiting on a parent that never finishes, beside the backlog")
}
