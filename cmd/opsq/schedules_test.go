package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSchedulesCommand: "opsq schedules" creates a schedule from a file, lists it, shows
// its next runs, triggers and backfills runs, pauses and deletes it, against a real
// instance; bad arguments are usage errors, and a bad cron is the server's 400 naming cron.
func TestSchedulesCommand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	file := filepath.Join(t.TempDir(), "import.json")
	if err := os.WriteFile(file, []byte(`{"prefix": "s3://bucket/{{.Date}}/", "chunk_count": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCLI(ctx, t, runSchedules, append([]string{"--url", u}, args...)...)
		if err != nil {
			t.Fatalf("opsq schedules %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	out := run("create", "nightly", "--cron", "0 2 * * *", "--timezone", "Europe/Amsterdam", "--submission", "@"+file)
	if strings.Count(out, "next run") != 3 {
		t.Errorf("create printed %q; want 3 next runs", out)
	}
	if out := run("list"); !strings.Contains(out, "nightly") || !strings.Contains(out, "Europe/Amsterdam") {
		t.Errorf("list printed %q; want the schedule", out)
	}
	if out := run("trigger", "nightly"); !strings.Contains(out, "submitted") {
		t.Errorf("trigger printed %q; want a submitted run", out)
	}
	from, to := time.Now().AddDate(0, 0, -2).UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339)
	if out := run("backfill", "nightly", "--from", from, "--to", to); !strings.Contains(out, "runs made") && !strings.Contains(out, "run made") {
		t.Errorf("backfill printed %q; want the runs made", out)
	}
	if out := run("show", "nightly"); strings.Count(out, "submitted") < 2 {
		t.Errorf("show printed %q; want the trigger's and the backfill's runs", out)
	}
	if out := run("pause", "nightly"); out != "schedule nightly paused\n" {
		t.Errorf("pause printed %q", out)
	}
	if out := run("delete", "nightly"); out != "schedule nightly deleted\n" {
		t.Errorf("delete printed %q", out)
	}
	_, _, err := runCLI(ctx, t, runSchedules, "--url", u, "create", "bad", "--cron", "@every 100ms", "--submission", `{"chunks": ["a"]}`)
	if err == nil || !strings.Contains(err.Error(), "cron:") {
		t.Errorf("a cron under a second: %v; want the server's error naming cron", err)
	}
	for _, args := range [][]string{
		{}, {"show"}, {"list", "x"}, {"create", "x"}, {"create", "x", "--cron", "@hourly"},
		{"create", "x", "--cron", "@hourly", "--submission", "{not json"}, {"backfill", "x", "--from", "yesterday", "--to", to},
		{"frobnicate", "x"},
	} {
		if _, _, err := runCLI(ctx, t, runSchedules, append([]string{"--url", u}, args...)...); !errors.Is(err, errUsage) {
			t.Errorf("opsq schedules %q: %v; want a usage error", args, err)
		}
	}
}
