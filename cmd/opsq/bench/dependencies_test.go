package bench

import (
	"strings"
	"testing"
	"time"
)

// TestLinkStart: a child's start delay is from its parent's complete sent to its chunk
// handed out; handed out before that, or previewed before it, it started early.
func TestLinkStart(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		answered  time.Time
		previewed bool
		want      time.Duration
		early     bool
	}{
		{sent.Add(40 * time.Millisecond), false, 40 * time.Millisecond, false},
		{sent.Add(1500 * time.Millisecond), false, 1500 * time.Millisecond, false},
		{sent.Add(-time.Millisecond), false, -time.Millisecond, true},
		{sent.Add(10 * time.Millisecond), true, 10 * time.Millisecond, true},
	} {
		d, early := linkStart(sent, tc.answered, tc.previewed)
		if d != tc.want || early != tc.early {
			t.Errorf("linkStart(answered %s after, previewed %t) = %s, %t; want %s, %t", tc.answered.Sub(sent), tc.previewed, d, early, tc.want, tc.early)
		}
	}
}

// TestDependencyConfigValidate: the dependencies workload's flags are checked only when it
// runs, and each bad one is named.
func TestDependencyConfigValidate(t *testing.T) {
	t.Parallel()
	good := DependencyConfig{DependencyChains: DependencyChainsDefault, DependencyBacklog: DependencyBacklogDefault, DependencyWaiting: DependencyWaitingDefault}
	cfg := Config{Samples: SamplesDefault, Workloads: []string{workloadDependencies}}
	if err := good.validate(cfg); err != nil {
		t.Errorf("the defaults: %v", err)
	}
	if err := (DependencyConfig{}).validate(Config{Workloads: []string{workloadLatency}}); err != nil {
		t.Errorf("not running: %v; want nil", err)
	}
	for flag, mutate := range map[string]func(*DependencyConfig){
		"--dependency-chains":  func(d *DependencyConfig) { d.DependencyChains = 0 },
		"--dependency-waiting": func(d *DependencyConfig) { d.DependencyWaiting = 0 },
		"--dependency-backlog": func(d *DependencyConfig) { d.DependencyBacklog = 2 * (SamplesDefault + latencyWarmup) }, // consumed by the 2 timings
	} {
		d := good
		mutate(&d)
		if err := d.validate(cfg); err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("bad %s: %v; want an error naming it", flag, err)
		}
	}
}
