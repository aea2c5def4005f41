package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

// timeLayout is how the client commands print times.
const timeLayout = time.RFC3339

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("status", "ID", `Show a submission's state. With --wait, show its progress until it finishes, and
exit with status 1 if it failed or was cancelled.`, stderr)
	wait := fs.Bool("wait", false, "wait until the submission finishes, showing its progress on stderr")
	asJSON := fs.Bool("json", false, "print the JSON status")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	c := fs.client()
	var s wire.Status
	if *wait {
		s, err = waitFinished(ctx, c, id, progress.NewLine(stderr))
	} else {
		s, err = c.Status(ctx, id, 0)
	}
	if err != nil {
		return explain(err, fs.url, "")
	}
	if *asJSON {
		err = printJSON(stdout, s)
	} else {
		_, err = io.WriteString(stdout, formatStatus(s, time.Now()))
	}
	if err != nil || !*wait {
		return err
	}
	return unsuccessful(s)
}

// formatStatus describes a submission for a person; now is used for ages.
func formatStatus(s wire.Status, now time.Time) string {
	var b strings.Builder
	row := func(name, format string, args ...any) {
		fmt.Fprintf(&b, "%-10s %s\n", name, fmt.Sprintf(format, args...))
	}
	row("id", "%s", s.ID)
	if s.Paused {
		row("state", "%s, paused (\"opsq resume %s\" hands its chunks out again)", s.State, s.ID)
	} else {
		row("state", "%s", s.State)
	}
	chunks := fmt.Sprintf("%s / %s done", progress.GroupDigits(s.ChunksDone), progress.GroupDigits(s.ChunksTotal))
	if s.ChunksTotal > 0 {
		chunks += fmt.Sprintf(" (%d%%)", progress.Percent(s.ChunksDone, s.ChunksTotal))
	}
	chunks += ", " + progress.GroupDigits(s.ChunksFailed) + " failed"
	if s.ChunksSkipped > 0 {
		chunks += ", " + progress.GroupDigits(s.ChunksSkipped) + " skipped"
	}
	row("chunks", "%s", chunks)
	if s.Failure != nil {
		row("failure", "%s", s.Failure)
	}
	if len(s.After) > 0 {
		after := strings.Join(s.After, ", ")
		if s.AfterPolicy == wire.AfterFinished {
			after += " (once finished, whatever their states)"
		}
		row("after", "%s", after)
		if len(s.WaitingOn) > 0 {
			row("waiting on", "%s", strings.Join(s.WaitingOn, ", "))
		}
	}
	if len(s.OnFailure) > 0 && string(s.OnFailure) != string(wire.OnFailureFailSubmission) {
		row("on failure", "%s", describeOnFailure(s.OnFailure))
	}
	if s.NotBefore != nil && s.NotBefore.After(now) {
		row("not before", "%s (in %s)", s.NotBefore.Format(timeLayout), progress.Duration(s.NotBefore.Sub(now)))
	}
	row("priority", "%d", s.Priority)
	if s.Metadata != "" {
		row("metadata", "%q", s.Metadata)
	}
	if len(s.StrategicMetadata) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(s.StrategicMetadata)) {
			kv = append(kv, k+"="+s.StrategicMetadata[k].String())
		}
		row("strategic", "%s", strings.Join(kv, " "))
	}
	if s.Prefix != "" {
		row("prefix", "%s", s.Prefix)
	}
	row("created", "%s (%s ago)", s.CreatedAt.Format(timeLayout), progress.Duration(now.Sub(s.CreatedAt)))
	if s.FinishedAt != nil {
		row("finished", "%s (after %s)", s.FinishedAt.Format(timeLayout), progress.Duration(s.FinishedAt.Sub(s.CreatedAt)))
	}
	return b.String()
}

// unsuccessful returns an error saying what to do if the submission ended failed or
// cancelled, and nil otherwise.
func unsuccessful(s wire.Status) error {
	switch s.State {
	case wire.StateFailed:
		why := ""
		if s.Failure != nil {
			why = " at " + s.Failure.String()
		}
		return fmt.Errorf(`submission %s failed%s; fix the cause and retry its failed chunks with "opsq retry %s" ("opsq failures %s" lists them)`, s.ID, why, s.ID, s.ID)
	case wire.StateCancelled:
		if s.Failure != nil { // a parent's end cancelled it
			return fmt.Errorf(`submission %s was cancelled: %s; retry that parent ("opsq retry") and it runs again`, s.ID, s.Failure.Error)
		}
		return fmt.Errorf("submission %s was cancelled; submit it again to run it", s.ID)
	}
	return nil
}

// describeOnFailure says in words what a failure policy other than the default does
// (DESIGN.md §3, on_failure); a form it does not know is shown as the server sent it.
func describeOnFailure(raw json.RawMessage) string {
	if string(raw) == string(wire.OnFailureContinue) {
		return "continue (the other chunks go on; the submission ends failed if any chunk failed)"
	}
	var p struct {
		FailAfter *struct {
			Chunks   *int64   `json:"chunks"`
			Fraction *float64 `json:"fraction"`
		} `json:"fail_after"`
	}
	if err := json.Unmarshal(raw, &p); err == nil && p.FailAfter != nil {
		switch {
		case p.FailAfter.Chunks != nil:
			return fmt.Sprintf("fail once more than %s chunks have failed", progress.GroupDigits(*p.FailAfter.Chunks))
		case p.FailAfter.Fraction != nil:
			return fmt.Sprintf("fail once more than %s%% of the chunks have failed", strconv.FormatFloat(*p.FailAfter.Fraction*100, 'f', -1, 64))
		}
	}
	return string(raw)
}
