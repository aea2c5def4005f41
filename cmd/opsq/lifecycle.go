package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// This file holds the commands for when work goes wrong: failures, retry, pause, resume.

// failuresPage is how many failed chunks "opsq failures" asks for at a time.
const failuresPage = 1000

func runFailures(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("failures", "ID", `List the chunks of a submission that failed at least one attempt, in chunk order: their
state (failed: attempts spent; skipped; retrying; completed after failing), retries, and last error. With --json, one JSON
object per chunk and line, with its last errors (newest first), who reported them and when.`, stderr)
	asJSON := fs.Bool("json", false, "print one JSON object per failed chunk and line (NDJSON)")
	limit := fs.Int64("limit", 0, "print at most `N` chunks (default: all)")
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	if *limit < 0 {
		return fs.usageError("--limit %d: want 1 or more, or 0 for all", *limit)
	}
	id := pos[0]
	c := fs.client()
	line := progress.NewLine(stderr)
	var tw *tabwriter.Writer
	var enc *json.Encoder
	if *asJSON {
		enc = json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
	} else {
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CHUNK\tSTATE\tRETRIES\tLAST ERROR")
	}
	var n int64
	var after *int64
	for {
		size := failuresPage
		if *limit > 0 {
			size = int(min(*limit-n, failuresPage))
		}
		page, err := c.Failures(ctx, id, client.FailuresOptions{Limit: size, After: after})
		if err != nil {
			line.Clear()
			return explain(err, fs.url, "")
		}
		for _, f := range page.Failures {
			if enc != nil {
				if err := enc.Encode(f); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(tw, "%d\t%s\t%d\t%s\n", f.ChunkIndex, f.State, f.Retries, oneLine(f.Error, 200))
			}
		}
		n += int64(len(page.Failures))
		if page.NextAfter == nil || (*limit > 0 && n >= *limit) {
			break
		}
		after = page.NextAfter
		line.Show(fmt.Sprintf("failures of %s: %s chunks read", id, progress.GroupDigits(n)))
	}
	line.Clear()
	if tw != nil {
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if n == 0 {
		fmt.Fprintf(stderr, "no chunk of %s has failed an attempt\n", id)
	}
	return nil
}

func runRetry(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("retry", "ID | --all", `Retry a submission's failed chunks: they get a fresh attempt budget and are handed out
again; completed outputs stay, and a finished submission is in progress again. With
--unfinished, its skipped chunks too (those a failure or a cancel left undone). With
--chunk N (repeated), only those chunks, each if it failed or was skipped. With
--wait, show its progress until it finishes again. With --all instead of an ID, retry every
submission in --state (failed) with --meta key=value, newest first, at most --limit.`, stderr)
	all := fs.Bool("all", false, "retry every submission that --state and --meta select, newest first (no ID)")
	var many wire.RetryManyRequest
	state := fs.String("state", string(wire.StateFailed), "with --all: submissions in this `state`: "+stateNames())
	fs.Func("meta", "with --all: submissions whose strategic metadata has `key=value` (value=42: the integer 42; value='\"42\"': the string)", func(m string) error {
		k, v, ok := strings.Cut(m, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("want key=value, such as company_id=42")
		}
		many.Key, many.Value = k, metaValueJSON(v)
		return nil
	})
	fs.IntVar(&many.Limit, "limit", 0, "with --all: at most `N` submissions, up to 1000 (default: the server's, 100)")
	var req wire.RetryRequest
	unfinished := fs.Bool("unfinished", false, "retry the skipped chunks too, not only the failed ones")
	fs.Func("chunk", "retry only chunk `N` (failed or skipped); repeat for several, up to 1000", func(s string) error {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("want a chunk index, a whole number, 0 or more")
		}
		req.ChunkIndexes = append(req.ChunkIndexes, n)
		return nil
	})
	fs.Func("max-retries", "give each chunk retried `N` retries, N+1 attempts (default: the submission's max_retries)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want a whole number, 0 or more")
		}
		req.MaxRetries = &n
		return nil
	})
	wait := fs.Bool("wait", false, "after retrying, show progress until the submission finishes; exit with status 1 if it failed again or was cancelled")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	if *unfinished {
		req.Chunks = wire.RetryUnfinished
	}
	c := fs.client()
	switch {
	case *all && len(pos) > 0:
		return fs.usageError("--all retries the submissions --state and --meta select: give no ID with it")
	case !*all && len(pos) == 0:
		return fs.usageError("give the ID of the submission to retry, or --all")
	case !*all && (isSet(fs.FlagSet, "meta") || isSet(fs.FlagSet, "limit") || isSet(fs.FlagSet, "state")):
		return fs.usageError("--state, --meta and --limit go with --all")
	case len(req.ChunkIndexes) > 0 && (*all || *unfinished):
		return fs.usageError("--chunk names the chunks of one submission to retry: not with --all or --unfinished")
	case len(req.ChunkIndexes) > wire.MaxRetryChunkIndexes:
		return fs.usageError("%d --chunk flags: at most %d in one retry", len(req.ChunkIndexes), wire.MaxRetryChunkIndexes)
	case *all && *wait:
		return fs.usageError("--wait follows one submission: give its ID instead of --all")
	case *all:
		many.State, many.Chunks, many.MaxRetries = wire.State(*state), req.Chunks, req.MaxRetries
		switch {
		case !slices.Contains(wire.States(), many.State):
			return fs.usageError("unknown --state %q: want one of %s", many.State, stateNames())
		case many.Limit < 0 || many.Limit > wire.MaxListLimit:
			return fs.usageError("--limit %d: want 1 to %d", many.Limit, wire.MaxListLimit)
		}
		ids, err := c.RetryMany(ctx, many)
		if err != nil {
			return explain(err, fs.url, "")
		}
		for _, id := range ids {
			fmt.Fprintln(stdout, id)
		}
		fmt.Fprintf(stderr, "retried %s submissions\n", progress.GroupDigits(int64(len(ids))))
		return nil
	}
	id := pos[0]
	s, err := c.Retry(ctx, id, req)
	if err != nil {
		nothing := fmt.Sprintf(`nothing to retry: no chunk of %s failed (with --unfinished, none was skipped either); "opsq failures %s" lists what failed`, id, id)
		if len(req.ChunkIndexes) > 0 {
			nothing = fmt.Sprintf(`nothing to retry: none of the chunks named with --chunk failed or was skipped; "opsq failures %s" lists what failed`, id)
		}
		return explain(err, fs.url, nothing)
	}
	fmt.Fprintf(stdout, "retrying %s: %s, %s / %s chunks done\n", s.ID, s.State, progress.GroupDigits(s.ChunksDone), progress.GroupDigits(s.ChunksTotal))
	if s.Paused { // a retry never lifts a pause
		fmt.Fprintf(stderr, "%s is paused: nothing of it is handed out until \"opsq resume %s\"\n", s.ID, s.ID)
	}
	if !*wait {
		return nil
	}
	s, err = waitFinished(ctx, c, id, progress.NewLine(stderr))
	if err != nil {
		return explain(err, fs.url, "")
	}
	return unsuccessful(s)
}

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseOrResume(ctx, "pause", `Pause a submission: nothing more of it is handed out until "opsq resume"; the chunks
in flight finish as usual. Pausing a paused submission is harmless.`, (*client.Client).Pause, args, stdout, stderr)
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return pauseOrResume(ctx, "resume", `Resume a paused submission: its chunks are handed out again at once. Resuming a
submission that is not paused is harmless.`, (*client.Client).Resume, args, stdout, stderr)
}

func pauseOrResume(ctx context.Context, name, about string, do func(*client.Client, context.Context, string) (wire.Status, error), args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags(name, "ID", about, stderr)
	pos, err := fs.parse(args, 1, 1)
	if err != nil {
		return err
	}
	id := pos[0]
	s, err := do(fs.client(), ctx, id)
	if err != nil {
		return explain(err, fs.url, fmt.Sprintf(`"opsq status %s" shows how it ended ("opsq retry %s" runs its failed chunks again)`, id, id))
	}
	fmt.Fprintln(stdout, formatPaused(s))
	return nil
}

// formatPaused says whether a submission is paused, and how far it is.
func formatPaused(s wire.Status) string {
	state := "running"
	if s.Paused {
		state = "paused"
	}
	return fmt.Sprintf("%s %s: %s / %s chunks done", state, s.ID, progress.GroupDigits(s.ChunksDone), progress.GroupDigits(s.ChunksTotal))
}

// metaValueJSON is a --meta value as JSON: an integer as a number, a JSON string as it is,
// any other text as a string.
func metaValueJSON(v string) json.RawMessage {
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return json.RawMessage(v)
	}
	var s string
	if json.Unmarshal([]byte(v), &s) == nil && strings.HasPrefix(v, `"`) {
		return json.RawMessage(v)
	}
	b, _ := json.Marshal(v)
	return b
}

// isSet reports whether flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
