package ui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/queuer"
)

func TestNum(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1\u00a0000", 123456: "123\u00a0456",
		1234567: "1\u00a0234\u00a0567", -1234: "-1\u00a0234",
	} {
		if got := num(n); got != want {
			t.Errorf("num(%d) = %q; want %q", n, got, want)
		}
	}
}

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "boom", 10, "boom"},
		{"exact", "boom", 4, "boom"},
		{"long", "boom boom", 4, "boom…"},
		{"rune boundary", "ééé", 3, "é…"}, // é is 2 bytes: byte 3 is inside the second
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := cut(tc.in, tc.n); got != tc.want {
				t.Errorf("cut(%q, %d) = %q; want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}

func TestPolicyText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		raw  json.RawMessage
		want string // a part of the text
	}{
		{"default", nil, "fail_submission"},
		{"fail_submission", wire.OnFailureFailSubmission, "first chunk to fail"},
		{"continue", wire.OnFailureContinue, "others go on"},
		{"after chunks", wire.OnFailureAfterChunks(1500), "more than 1\u00a0500 failed chunks"},
		{"after fraction", json.RawMessage(`{"fail_after": {"fraction": 0.25}}`), "more than 25 % of the chunks"},
		{"unknown", json.RawMessage(`{"other": 1}`), `{"other": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := policyText(tc.raw); !strings.Contains(got, tc.want) {
				t.Errorf("policyText(%s) = %q; want it to say %q", tc.raw, got, tc.want)
			}
		})
	}
}

// TestActionsOf: which buttons a submission's page offers in each state.
func TestActionsOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    submissionView
		want string
	}{
		{"running", submissionView{State: wire.StateInProgress}, "pause cancel"},
		{"paused", submissionView{State: wire.StateInProgress, Paused: true}, "resume cancel"},
		{"running with failed chunks (continue)", submissionView{State: wire.StateInProgress, Failed: 2}, "retry pause cancel"},
		{"failed, nothing skipped", submissionView{State: wire.StateFailed, Failed: 1}, "retry"},
		{"failed with skipped chunks", submissionView{State: wire.StateFailed, Failed: 1, Skipped: 9}, "retry retry_unfinished"},
		{"cancelled with skipped chunks", submissionView{State: wire.StateCancelled, Skipped: 9}, "retry_unfinished"},
		{"cancelled, nothing left", submissionView{State: wire.StateCancelled}, ""},
		{"completed", submissionView{State: wire.StateCompleted}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(actionsOf(tc.v), " "); got != tc.want {
				t.Errorf("actions = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestBulkButtons: the list offers to act on the page's submissions that each action
// applies to, and says how many.
func TestBulkButtons(t *testing.T) {
	t.Parallel()
	rows := []submissionView{
		{ID: "1", State: wire.StateFailed, Failed: 1},
		{ID: "2", State: wire.StateFailed, Failed: 3, Skipped: 5},
		{ID: "3", State: wire.StateInProgress},
		{ID: "4", State: wire.StateCompleted},
	}
	var got []string
	for _, b := range bulkButtons(rows) {
		got = append(got, b.Name+": "+b.Label)
	}
	want := []string{"retry: Retry failed (2 on this page)", "pause: Pause all (1 on this page)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("bulk buttons %q; want %q", got, want)
	}
	retry, _ := findAction("retry")
	if ids := applying(retry, rows); strings.Join(ids, ",") != "1,2" {
		t.Errorf("retry applies to %v; want [1 2]", ids)
	}
}

func TestParseIDs(t *testing.T) {
	t.Parallel()
	if ids, err := parseIDs("12,34"); err != nil || len(ids) != 2 || ids[0] != 12 || ids[1] != 34 {
		t.Errorf("parseIDs(12,34) = %v, %v; want [12 34]", ids, err)
	}
	tooMany := strings.TrimSuffix(strings.Repeat("1,", pageSize+1), ",")
	for _, bad := range []string{"", "1,,2", "0", "-3", "x", "1;2", tooMany} {
		if ids, err := parseIDs(bad); err == nil {
			t.Errorf("parseIDs(%.20q) = %v; want an error", bad, ids)
		}
	}
}

func TestDoneNotice(t *testing.T) {
	t.Parallel()
	if got := doneNotice("retry", "2", "2"); got != "Retried 2 of 2 submissions." {
		t.Errorf("notice = %q", got)
	}
	if got := doneNotice("pause", "1", "3"); !strings.HasPrefix(got, "Paused 1 of 3 submissions. The others") {
		t.Errorf("notice = %q", got)
	}
	for _, bad := range [][3]string{{"cancel", "1", "1"}, {"retry", "3", "2"}, {"retry", "x", "1"}, {"resume", "1", "1000"}} {
		if got := doneNotice(bad[0], bad[1], bad[2]); got != "" {
			t.Errorf("doneNotice%q = %q; want none", bad, got)
		}
	}
}

// TestSubmissionPage renders a failed submission's page: its policy, its failed chunks
// with each error cut in the row and whole in its details, escaped, and the buttons that
// apply shown, the others hidden.
func TestSubmissionPage(t *testing.T) {
	t.Parallel()
	long := "<b>boom</b> " + strings.Repeat("x", 1000) + " END"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	idx := int64(7)
	st := queuer.Status{ID: 42, State: wire.StateFailed, ChunksTotal: 12345, ChunksDone: 1000, ChunksFailed: 1,
		ChunksSkipped: 11344, OnFailure: wire.OnFailureFailSubmission, CreatedAt: at, FinishedAt: &at,
		FailedChunkIndex: &idx, Error: &long, NotBefore: &at, StrategicMetadata: json.RawMessage(`{}`)}
	v := detailView{submissionView: toView(st, at), Actions: submissionActions, Applies: map[string]bool{}}
	for _, a := range actionsOf(v.submissionView) {
		v.Applies[a] = true
	}
	v.Failures = toFailures([]queuer.FailedChunk{{ChunkIndex: 7, State: queuer.FailedChunkFailed, Retries: 3,
		Errors: []queuer.AttemptError{{Error: long, Consumer: "host-1", At: at}, {Error: "older", At: at}}}})
	var b bytes.Buffer
	if err := parsePages()["submission"].Execute(&b, page{Title: "Submission 42", Data: v}); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"1\u00a0000 / 1 / 11\u00a0344 / 12\u00a0345", // the counts, with thousands separators
		`data-skipped="11344"`,                       // the bar's numbers for the script
		`first chunk to fail`,                        // the policy
		`id="not-before">2026-01-02T03:04:05Z`,       // not_before
		`<tr data-chunk="7">`,
		`&lt;b&gt;boom&lt;/b&gt; xxx`, // escaped
		`x END</pre>`,                 // the whole error in the details
		`older</pre>`,                 // and the older one
		`host-1, 2026-01-02T03:04:05Z`,
		`id="retry" data-action="retry" href="/ui/submissions/42/confirm?action=retry">`,
		`id="retry_unfinished" data-action="retry_unfinished" href="/ui/submissions/42/confirm?action=retry_unfinished">`,
		`id="pause" data-action="pause" href="/ui/submissions/42/confirm?action=pause" hidden>`,
		`id="cancel" data-action="cancel" href="/ui/submissions/42/cancel" hidden>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	summary := html[strings.Index(html, "<summary"):strings.Index(html, "</summary>")]
	if strings.Contains(summary, "END") || len(summary) > errorShown+100 {
		t.Errorf("the row shows %d bytes of the error (%q…); want it cut to %d", len(summary), summary[:60], errorShown)
	}
}
