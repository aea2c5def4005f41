package main

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseBenchArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, cfg benchArgs)
		wantErr error
	}{
		{
			name: "defaults",
			check: func(t *testing.T, cfg benchArgs) {
				if cfg.Instances != 2 || cfg.Consumers != 64 || cfg.Max != 10 || cfg.Samples != 2000 || cfg.JSON ||
					cfg.IngestChunks != 1_000_000 || cfg.BurndownChunks != 300_000 || cfg.RSSReservations != 100_000 || cfg.RiverRate != 0 ||
					cfg.DistinctSubmissions != 200_000 || cfg.DistinctValues != 2000 || cfg.DistinctHeld != 500 ||
					!slices.Equal(cfg.Workloads, []string{"ingest", "burndown", "latency", "distinct"}) || !slices.Equal(cfg.Backlogs, []int64{10_000, 1_000_000}) {
					t.Errorf("got %+v; want the defaults", cfg)
				}
			},
		},
		{
			name: "every flag",
			args: []string{"--database-url", "postgres://u@h:1/db", "--dev-cluster", "/d", "--instances", "3", "--workload", "rss, latency",
				"--ingest-chunks", "20k", "--burndown-chunks", "1_000", "--consumers", "8", "--max", "100", "--backlogs", "1000,4M",
				"--samples", "300", "--vacuum", "--rss-reservations", "5000", "--river-rate", "12000.5", "--json",
				"--distinct-submissions", "20k", "--distinct-values", "100", "--distinct-held", "0"},
			check: func(t *testing.T, cfg benchArgs) {
				if cfg.databaseURL != "postgres://u@h:1/db" || cfg.devCluster != "/d" || cfg.Instances != 3 || cfg.Consumers != 8 ||
					cfg.Max != 100 || cfg.Samples != 300 || !cfg.Vacuum || !cfg.JSON || cfg.IngestChunks != 20_000 || cfg.BurndownChunks != 1000 ||
					cfg.RSSReservations != 5000 || cfg.RiverRate != 12000.5 ||
					cfg.DistinctSubmissions != 20_000 || cfg.DistinctValues != 100 || cfg.DistinctHeld != 0 ||
					!slices.Equal(cfg.Workloads, []string{"rss", "latency"}) || !slices.Equal(cfg.Backlogs, []int64{1000, 4_000_000}) {
					t.Errorf("got %+v; want every flag set", cfg)
				}
			},
		},
		{name: "help", args: []string{"--help"}, wantErr: flag.ErrHelp},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: errUsage},
		{name: "argument", args: []string{"ingest"}, wantErr: errUsage},
		{name: "unknown workload", args: []string{"--workload", "ingest,fast"}, wantErr: errUsage},
		{name: "workload twice", args: []string{"--workload", "ingest,ingest"}, wantErr: errUsage},
		{name: "no workload", args: []string{"--workload", ","}, wantErr: errUsage},
		{name: "bad backlog", args: []string{"--backlogs", "1000,lots"}, wantErr: errUsage},
		{name: "backlog too small for the samples", args: []string{"--backlogs", "1000", "--samples", "990"}, wantErr: errUsage},
		{name: "small backlog fine without latency", args: []string{"--backlogs", "10", "--workload", "ingest"}},
		{name: "no instance", args: []string{"--instances", "0"}, wantErr: errUsage},
		{name: "max too large", args: []string{"--max", "10001"}, wantErr: errUsage},
		{name: "no consumer", args: []string{"--consumers", "0"}, wantErr: errUsage},
		{name: "zero chunks", args: []string{"--ingest-chunks", "0"}, wantErr: errUsage},
		{name: "negative river rate", args: []string{"--river-rate", "-1"}, wantErr: errUsage},
		{name: "distinct alone", args: []string{"--workload", "distinct", "--distinct-submissions", "20000", "--samples", "300"}},
		{name: "more values than submissions", args: []string{"--distinct-submissions", "1000", "--distinct-values", "1001"}, wantErr: errUsage},
		{name: "every value held", args: []string{"--distinct-values", "500", "--distinct-held", "500"}, wantErr: errUsage},
		{name: "negative held", args: []string{"--distinct-held", "-1"}, wantErr: errUsage},
		{name: "zero values", args: []string{"--distinct-values", "0"}, wantErr: errUsage},
		{name: "too few submissions for the reserves", args: []string{"--workload", "distinct", "--distinct-submissions", "2519",
			"--distinct-values", "600"}, wantErr: errUsage},
		{
			name: "failures and waiting",
			args: []string{"--workload", "failures,latency", "--failure-chunks", "2k", "--failure-rate", "0.05", "--backlogs", "10000", "--waiting", "20k"},
			check: func(t *testing.T, cfg benchArgs) {
				if cfg.FailureChunks != 2000 || cfg.FailureRate != 0.05 || cfg.Waiting != 20_000 {
					t.Errorf("got --failure-chunks %d, --failure-rate %g, --waiting %d; want 2000, 0.05, 20000", cfg.FailureChunks, cfg.FailureRate, cfg.Waiting)
				}
			},
		},
		{
			name: "failures and waiting defaults",
			check: func(t *testing.T, cfg benchArgs) {
				if cfg.FailureChunks != 100_000 || cfg.FailureRate != 0.01 || cfg.FailureRounds != 3 || cfg.Waiting != 0 {
					t.Errorf("got --failure-chunks %d, --failure-rate %g, --failure-rounds %d, --waiting %d; want 100000, 0.01, 3, 0",
						cfg.FailureChunks, cfg.FailureRate, cfg.FailureRounds, cfg.Waiting)
				}
			},
		},
		{name: "waiting 0", args: []string{"--waiting", "0"}},
		{name: "negative waiting", args: []string{"--waiting", "-1"}, wantErr: errUsage},
		{name: "failure rate over 1", args: []string{"--failure-rate", "1.5"}, wantErr: errUsage},
		{name: "no failure round", args: []string{"--failure-rounds", "0"}, wantErr: errUsage},
		{name: "failure rounds", args: []string{"--failure-rounds", "5"}, check: func(t *testing.T, cfg benchArgs) {
			if cfg.FailureRounds != 5 {
				t.Errorf("--failure-rounds 5: got %d", cfg.FailureRounds)
			}
		}},
		{name: "no failure chunk", args: []string{"--failure-chunks", "0"}, wantErr: errUsage},
		{name: "backlog too small to be timed twice", args: []string{"--workload", "latency", "--backlogs", "1000", "--samples", "480", "--waiting", "10"},
			wantErr: errUsage},
		{name: "backlog timed once without waiting", args: []string{"--workload", "latency", "--backlogs", "1000", "--samples", "480"}},
		{name: "tenants default size", args: []string{"--workload", "tenants"}, check: func(t *testing.T, cfg benchArgs) {
			if cfg.TenantChunks != 10_000_000 {
				t.Errorf("--tenant-chunks defaults to %d; want 10000000 (DESIGN.md §6)", cfg.TenantChunks)
			}
		}},
		{name: "tenants smaller", args: []string{"--workload", "tenants", "--tenant-chunks", "1M"}, check: func(t *testing.T, cfg benchArgs) {
			if cfg.TenantChunks != 1_000_000 {
				t.Errorf("--tenant-chunks 1M: got %d", cfg.TenantChunks)
			}
		}},
		{name: "tenants too few chunks per tenant for the reserves", args: []string{"--workload", "tenants", "--tenant-chunks", "4000",
			"--samples", "20"}, wantErr: errUsage},
		{name: "tenants need keys", args: []string{"--workload", "tenants", "--auth", "off"}, wantErr: errUsage},
		{name: "few tenant chunks fine without tenants", args: []string{"--workload", "ingest", "--tenant-chunks", "10"}},
		{name: "few submissions fine without distinct", args: []string{"--workload", "ingest", "--distinct-submissions", "10",
			"--distinct-values", "5", "--distinct-held", "4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseBenchArgs(tt.args, io.Discard)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("parseBenchArgs(%q) error = %v; want %v", tt.args, err, tt.wantErr)
			}
			if err == nil && tt.check != nil {
				tt.check(t, cfg)
			}
		})
	}
}

func TestBenchHelpListsEveryFlagWithDefault(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if _, err := parseBenchArgs([]string{"--help"}, &b); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v; want flag.ErrHelp", err)
	}
	help := b.String()
	for _, name := range []string{"database-url", "dev-cluster", "instances", "workload", "ingest-chunks", "burndown-chunks",
		"consumers", "max", "backlogs", "samples", "rss-reservations", "river-rate", "json",
		"distinct-submissions", "distinct-values", "distinct-held", "waiting", "failure-chunks", "failure-rate"} {
		i := strings.Index(help, "\n  --"+name+" ")
		if i < 0 {
			i = strings.Index(help, "\n  --"+name+"\n")
		}
		if i < 0 {
			t.Errorf("help does not list --%s:\n%s", name, help)
			continue
		}
		entry, _, _ := strings.Cut(help[i+1:], "\n  --")
		if !strings.Contains(entry, "(default ") {
			t.Errorf("help of --%s gives no default: %q", name, entry)
		}
	}
	for _, want := range []string{"(default 1000000)", "(default ingest,burndown,latency,distinct)", "(default 200000)", "(default 2000)", "(default 500)", "(default 10000,1000000)", "(default false)", "(default 0)"} {
		if !strings.Contains(help, want) {
			t.Errorf("help does not say %q:\n%s", want, help)
		}
	}
}

func TestCountFlag(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"1": 1, "1000000": 1_000_000, "1_000_000": 1_000_000, "10k": 10_000, "4M": 4_000_000, "2147483647": 1<<31 - 1} {
		var c countFlag
		if err := c.Set(in); err != nil || int64(c) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, c, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5", "1.5M", "lots", "3000M", "2147483648", "10K"} {
		var c countFlag
		if err := c.Set(in); err == nil {
			t.Errorf("Set(%q) = %d; want an error", in, c)
		}
	}
}

func TestParseBenchAbuseArgs(t *testing.T) {
	t.Parallel()
	cfg, err := parseBenchArgs([]string{"--workload", "abuse"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AbuseDuration != time.Minute || cfg.AbuseStalls != 100 || cfg.AbuseForged != 10_000 || cfg.AbuseMethods != 3000 ||
		cfg.AbuseBigChunks != 10_000 || cfg.AbuseKeys != 300_000 {
		t.Errorf("got %+v; want the abuse defaults of issue 7", cfg)
	}
	cfg, err = parseBenchArgs([]string{"--workload", "abuse", "--abuse-duration", "5s", "--abuse-stalls", "3", "--abuse-forged", "7",
		"--abuse-methods", "0", "--abuse-big-chunks", "9", "--abuse-keys", "40"}, io.Discard)
	if err != nil || cfg.AbuseDuration != 5*time.Second || cfg.AbuseStalls != 3 || cfg.AbuseForged != 7 || cfg.AbuseMethods != 0 ||
		cfg.AbuseBigChunks != 9 || cfg.AbuseKeys != 40 {
		t.Errorf("got %+v, %v; want every abuse flag set", cfg, err)
	}
	for _, args := range [][]string{{"--abuse-duration", "0s"}, {"--abuse-stalls", "-1"}, {"--abuse-forged", "-1"},
		{"--abuse-methods", "-1"}, {"--abuse-big-chunks", "0"}, {"--abuse-keys", "32"}} {
		if _, err := parseBenchArgs(args, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("parseBenchArgs(%q) = %v; want a usage error", args, err)
		}
	}
}
