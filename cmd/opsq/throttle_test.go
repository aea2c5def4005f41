package main

import (
	"errors"
	"strings"
	"testing"

	"opsq/api/wire"
	"opsq/client"
)

// TestThrottleCommand: "opsq throttle KEY=VALUE --for D" throttles a value and "opsq
// throttle --lift KEY=VALUE" ends it, against a real instance: the value's chunk is held
// back between the two and handed out after; lifting again says there is nothing to lift;
// bad arguments are usage errors naming what is wrong.
func TestThrottleCommand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := startWorkServer(t)
	c := client.New(u)
	if _, err := c.Submit(ctx, wire.Submission{Chunks: []string{"held"}, SubmissionHeader: wire.SubmissionHeader{
		StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(5)}}}); err != nil {
		t.Fatal(err)
	}
	reserve := func() int {
		t.Helper()
		got, err := c.Reserve(ctx, wire.ReserveRequest{Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	out, errOut, err := runCLI(ctx, t, runThrottle, "--url", u, "company_id=5", "--for", "1h")
	if err != nil || !strings.Contains(out, "company_id = 5 throttled until ") {
		t.Fatalf("opsq throttle: %v\n%s%s", err, out, errOut)
	}
	if n := reserve(); n != 0 {
		t.Fatalf("reserve while throttled: %d chunks; want none", n)
	}
	out, errOut, err = runCLI(ctx, t, runThrottle, "--url", u, "--lift", "company_id=5")
	if err != nil || out != "company_id = 5 lifted (1 throttle)\n" {
		t.Fatalf("opsq throttle --lift: %v\n%s%s", err, out, errOut)
	}
	if n := reserve(); n != 1 {
		t.Errorf("reserve after the lift: %d chunks; want the held one", n)
	}
	if _, _, err := runCLI(ctx, t, runThrottle, "--url", u, "--lift", "company_id=5"); err == nil || !strings.Contains(err.Error(), "nothing to lift") {
		t.Errorf("lifting it again: %v; want an error saying there is nothing to lift", err)
	}
	if _, _, err := runCLI(ctx, t, runThrottle, "--url", u, "--lift", `mode="5"`); err == nil || !strings.Contains(err.Error(), `no throttle of mode = "5" in force`) {
		t.Errorf("lifting the string \"5\": %v; want no such throttle of the string", err)
	}
	for _, args := range [][]string{
		{"company_id=5"},                          // no --for
		{"company_id=5", "--for", "2h"},           // too long
		{"--lift", "company_id"},                  // no value
		{"--lift", "company_id=5", "k=1"},         // both
		{"--lift", "company_id=5", "--for", "1m"}, // --for with --lift
		{},
	} {
		_, errOut, err := runCLI(ctx, t, runThrottle, append([]string{"--url", u}, args...)...)
		if !errors.Is(err, errUsage) || errOut == "" {
			t.Errorf("opsq throttle %q: %v, stderr %q; want a usage error that says what is wrong", args, err, errOut)
		}
	}
}
