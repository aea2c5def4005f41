package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

func TestFormatStatus(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	finished := created.Add(90 * time.Second)
	s := wire.Status{
		ID: "42", State: wire.StateFailed, ChunksTotal: 10000, ChunksDone: 1234, ChunksFailed: 8766, Priority: 2,
		Metadata:          "run 7",
		StrategicMetadata: map[string]wire.MetadataValue{"mode": wire.String("preview"), "company_id": wire.Int(42)},
		CreatedAt:         created, FinishedAt: &finished,
		Failure: &wire.Failure{ChunkIndex: ptr(int64(7)), Error: "boom"},
	}
	want := "" +
		"id         42\n" +
		"state      failed\n" +
		"chunks     1 234 / 10 000 done (12%), 8 766 failed\n" +
		"failure    chunk 7: boom\n" +
		"priority   2\n" +
		"metadata   \"run 7\"\n" +
		"strategic  company_id=42 mode=\"preview\"\n" +
		"created    2026-01-02T03:04:05Z (5m0s ago)\n" +
		"finished   2026-01-02T03:05:35Z (after 1m30s)\n"
	if got := formatStatus(s, created.Add(5*time.Minute)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// The lifecycle: paused, skipped chunks, a policy other than the default, not_before.
	notBefore := created.Add(time.Hour)
	s = wire.Status{
		ID: "43", State: wire.StateInProgress, Paused: true, ChunksTotal: 10, ChunksDone: 2, ChunksFailed: 1, ChunksSkipped: 3,
		OnFailure: wire.OnFailureAfterChunks(2), NotBefore: &notBefore, CreatedAt: created,
	}
	want = "" +
		"id         43\n" +
		"state      in_progress, paused (\"opsq resume 43\" hands its chunks out again)\n" +
		"chunks     2 / 10 done (20%), 1 failed, 3 skipped\n" +
		"on failure fail once more than 2 chunks have failed\n" +
		"not before 2026-01-02T04:04:05Z (in 55m0s)\n" +
		"priority   0\n" +
		"created    2026-01-02T03:04:05Z (5m0s ago)\n"
	if got := formatStatus(s, created.Add(5*time.Minute)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// A child: its parents and those it waits on; then cancelled by one of them.
	s = wire.Status{ID: "44", State: wire.StateInProgress, ChunksTotal: 1, CreatedAt: created,
		After: []string{"42", "43"}, AfterPolicy: wire.AfterCompleted, WaitingOn: []string{"43"}}
	want = "" +
		"id         44\n" +
		"state      in_progress\n" +
		"chunks     0 / 1 done (0%), 0 failed\n" +
		"after      42, 43\n" +
		"waiting on 43\n" +
		"priority   0\n" +
		"created    2026-01-02T03:04:05Z (5m0s ago)\n"
	if got := formatStatus(s, created.Add(5*time.Minute)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	s.State, s.WaitingOn, s.AfterPolicy, s.Failure = wire.StateCancelled, nil, wire.AfterFinished, &wire.Failure{Error: "parent 43 failed"}
	if got := formatStatus(s, created.Add(5*time.Minute)); !strings.Contains(got, "failure    parent 43 failed\n") ||
		!strings.Contains(got, "after      42, 43 (once finished, whatever their states)\n") || strings.Contains(got, "waiting on") {
		t.Errorf("got\n%s\nwant the failure naming the parent, the policy, and no waiting on", got)
	}
}

func TestDescribeOnFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw  json.RawMessage
		want string
	}{
		{wire.OnFailureContinue, "continue (the other chunks go on; the submission ends failed if any chunk failed)"},
		{wire.OnFailureAfterChunks(1500), "fail once more than 1 500 chunks have failed"},
		{wire.OnFailureAfterFraction(0.05), "fail once more than 5% of the chunks have failed"},
		{json.RawMessage(`{"fail_after":{"later":1}}`), `{"fail_after":{"later":1}}`},
	} {
		if got := describeOnFailure(tc.raw); got != tc.want {
			t.Errorf("describeOnFailure(%s) = %q; want %q", tc.raw, got, tc.want)
		}
	}
}

func TestUnsuccessful(t *testing.T) {
	t.Parallel()
	if err := unsuccessful(wire.Status{ID: "1", State: wire.StateCompleted}); err != nil {
		t.Errorf("completed: got %v; want nil", err)
	}
	err := unsuccessful(wire.Status{ID: "1", State: wire.StateFailed, Failure: &wire.Failure{ChunkIndex: ptr(int64(3)), Error: "boom"}})
	if err == nil || !strings.Contains(err.Error(), "failed at chunk 3: boom") || !strings.Contains(err.Error(), "opsq retry 1") {
		t.Errorf("failed: got %v; want the failure", err)
	}
	if err := unsuccessful(wire.Status{ID: "1", State: wire.StateCancelled}); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("cancelled: got %v; want an error saying so", err)
	}
}
