package main

import (
	"errors"
	"io"
	"testing"
	"time"
)

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
