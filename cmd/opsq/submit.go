package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// submitOptions is what the flags and arguments of "opsq submit" ask for.
type submitOptions struct {
	url    string
	key    string
	header wire.SubmissionHeader
	ndjson bool   // the input is NDJSON chunk lines already
	wait   bool   // wait until the submission finishes
	input  string // the input file; "" or "-" for stdin
	// traceparent is the W3C traceparent sent with the submission: --traceparent, which
	// defaults to $TRACEPARENT (what "opsq work" gives its command).
	traceparent string
}

// parseSubmitArgs parses the arguments of "opsq submit".
func parseSubmitArgs(args []string, stderr io.Writer) (submitOptions, error) {
	fs := newClientFlags("submit", "[FILE|-]", `Submit the lines of FILE, or of stdin when FILE is absent or "-", as the chunks of one
submission, one chunk per line ("\n" or "\r\n" ending). The input is streamed: it may be
as large as you like. Prints the submission's id alone on the first line of stdout, and
progress and a summary on stderr. With --prefix, no input is read: the chunks are objects
PREFIX+index in object storage, which the consumers read themselves.`, stderr)
	var o submitOptions
	h := &o.header
	var backoffInitial, backoffMax time.Duration
	fs.BoolVar(&o.ndjson, "ndjson", false, "the input is NDJSON: one chunk per line, each a JSON string")
	fs.StringVar(&o.traceparent, "traceparent", os.Getenv("TRACEPARENT"), "the W3C `traceparent` of the producer's span, handed out with each chunk so that consumers join its trace; an invalid one is ignored (default $TRACEPARENT)")
	fs.StringVar(&h.Metadata, "metadata", "", "opaque `text` handed to every consumer of the chunks")
	fs.Func("meta", "strategic metadata `key=value`, repeatable; an integer value is an integer, anything else a string", func(s string) error {
		k, v, err := parseMeta(s)
		if err != nil {
			return err
		}
		if _, dup := h.StrategicMetadata[k]; dup {
			return fmt.Errorf("key %q given twice", k)
		}
		if h.StrategicMetadata == nil {
			h.StrategicMetadata = map[string]wire.MetadataValue{}
		}
		h.StrategicMetadata[k] = v
		return nil
	})
	fs.Int64Var(&h.Priority, "priority", 0, "priority for the custom_priority strategy, higher first")
	fs.Func("max-retries", "allow `N` retries per chunk, N+1 attempts (default: the server's default_max_retries, 10)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return errors.New("want a whole number, 0 or more")
		}
		h.MaxRetries = &n
		return nil
	})
	fs.StringVar(&h.IdempotencyKey, "idempotency-key", "", "a `key` that makes a repeated submit return the first submission instead of a new one")
	fs.StringVar(&h.Tenant, "tenant", "", "the `tenant` that owns the submission (admin keys only; a producer key's submissions are its tenant's)")
	fs.StringVar(&h.Prefix, "prefix", "", "object-storage mode: the chunks are `PREFIX`+index (needs --chunk-count; no input is read)")
	fs.Int64Var(&h.ChunkCount, "chunk-count", 0, "the number of chunks, `N`, with --prefix")
	fs.Func("on-failure", "what a chunk whose attempts are spent does to the submission: `POLICY` fail_submission (the default), continue, fail_after:K (more than K chunks failed) or fail_after:F% (more than F percent)", func(v string) error {
		raw, err := parseOnFailureFlag(v)
		h.OnFailure = raw
		return err
	})
	fs.StringVar(&h.NotBefore, "not-before", "", "hand nothing out before `TIME` (RFC 3339, such as 2026-01-02T15:04:05Z) or a duration from now (such as 10m); at most 30 days ahead")
	fs.Func("after", "start only after the submissions `ID[,ID]` finished (at most 100, of the same tenant; repeat the flag or separate the ids with commas); the submission is created at once and hands nothing out until then", func(v string) error {
		for _, id := range strings.Split(v, ",") {
			id = strings.TrimSpace(id)
			if n, err := strconv.ParseInt(id, 10, 64); err != nil || n <= 0 {
				return fmt.Errorf("%q is not a submission id", id)
			}
			h.After = append(h.After, id)
		}
		return nil
	})
	fs.Func("after-policy", "with --after: `POLICY` completed (the default: start once every parent completed; a parent that failed or was cancelled cancels this one) or finished (start once they finished, whatever their states)", func(v string) error {
		if v != wire.AfterCompleted && v != wire.AfterFinished {
			return errors.New(`want "completed" or "finished"`)
		}
		h.AfterPolicy = v
		return nil
	})
	var backoff wire.RetryBackoff
	fs.DurationVar(&backoffInitial, "backoff-initial", 0, "a retried chunk waits this `duration` before its first retry (0s: at once; default 1s)")
	fs.Float64Var(&backoff.Factor, "backoff-factor", 0, "each further retry waits this `factor` longer (default 2)")
	fs.DurationVar(&backoffMax, "backoff-max", 0, "a retry waits at most this `duration` (default 1m)")
	fs.BoolVar(&o.wait, "wait", false, "after submitting, show progress until the submission finishes; exit with status 1 if it failed or was cancelled")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return o, err
	}
	o.url, o.key = fs.url, fs.key
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["backoff-initial"] || set["backoff-factor"] || set["backoff-max"] {
		switch {
		case backoffInitial < 0 || backoffInitial > wire.MaxBackoff:
			return o, fs.usageError("--backoff-initial %s: want 0s to %s", backoffInitial, wire.MaxBackoff)
		case set["backoff-factor"] && !(backoff.Factor > 0 && !math.IsInf(backoff.Factor, 0)):
			return o, fs.usageError("--backoff-factor %g: want a number greater than 0, such as 2", backoff.Factor)
		case set["backoff-max"] && (backoffMax <= 0 || backoffMax > wire.MaxBackoff):
			return o, fs.usageError("--backoff-max %s: want more than 0s, at most %s", backoffMax, wire.MaxBackoff)
		}
		if set["backoff-initial"] {
			backoff.Initial = backoffInitial.String()
		}
		if set["backoff-max"] {
			backoff.Max = backoffMax.String()
		}
		h.RetryBackoff = &backoff
	}
	if h.NotBefore != "" {
		if _, err := time.Parse(time.RFC3339Nano, h.NotBefore); err != nil {
			if d, err := time.ParseDuration(h.NotBefore); err != nil || d < 0 {
				return o, fs.usageError("--not-before %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z, or a duration from now such as 10m", h.NotBefore)
			}
		}
	}
	if len(h.After) > wire.MaxAfter {
		return o, fs.usageError("--after: %d parents; at most %d", len(h.After), wire.MaxAfter)
	}
	if h.AfterPolicy != "" && len(h.After) == 0 {
		return o, fs.usageError("--after-policy goes with --after")
	}
	if len(pos) == 1 {
		o.input = pos[0]
	}
	switch {
	case h.Prefix != "" && h.ChunkCount < 1:
		return o, fs.usageError("--prefix needs --chunk-count, 1 or more")
	case h.Prefix == "" && h.ChunkCount != 0:
		return o, fs.usageError("--chunk-count goes with --prefix; without it, the chunks are the input's lines")
	case h.Prefix != "" && (o.input != "" || o.ndjson):
		return o, fs.usageError("--prefix reads no input: drop the FILE argument and --ndjson")
	}
	return o, nil
}

// parseOnFailureFlag turns --on-failure into the JSON of on_failure: fail_submission,
// continue, fail_after:K (a number of chunks) or fail_after:F% (a percentage of them).
func parseOnFailureFlag(v string) (json.RawMessage, error) {
	switch v {
	case "fail_submission":
		return wire.OnFailureFailSubmission, nil
	case "continue":
		return wire.OnFailureContinue, nil
	}
	n, ok := strings.CutPrefix(v, "fail_after:")
	if !ok {
		return nil, errors.New("want fail_submission, continue, fail_after:K or fail_after:F%")
	}
	if pct, ok := strings.CutSuffix(n, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || !(f > 0 && f <= 100) {
			return nil, errors.New("fail_after:F%: want a percentage greater than 0 and at most 100, such as fail_after:5%")
		}
		return wire.OnFailureAfterFraction(f / 100), nil
	}
	k, err := strconv.ParseInt(n, 10, 32)
	if err != nil || k < 0 {
		return nil, errors.New("fail_after:K: want a whole number of chunks, 0 or more, such as fail_after:10 (or a percentage, fail_after:5%)")
	}
	return wire.OnFailureAfterChunks(k), nil
}

// parseMeta parses "key=value"; a value that parses as an int64 is an integer.
func parseMeta(s string) (string, wire.MetadataValue, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", wire.MetadataValue{}, fmt.Errorf("%q: want key=value", s)
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return k, wire.Int(i), nil
	}
	return k, wire.String(v), nil
}

func runSubmit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSubmitArgs(args, stderr)
	if err != nil {
		return err
	}
	c := newClient(o.url, o.key)
	line := progress.NewLine(stderr)
	start := time.Now()
	var created wire.Created
	if o.header.Prefix != "" {
		created, err = c.Submit(ctx, wire.Submission{SubmissionHeader: o.header}, client.WithTraceparent(o.traceparent))
		err = explain(err, o.url, "")
	} else {
		created, err = submitInput(ctx, c, o, line)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, created.ID)
	fmt.Fprintln(stderr, progress.Submitted(created.ChunksTotal, time.Since(start)))
	if !o.wait {
		return nil
	}
	s, err := waitFinished(ctx, c, created.ID, line)
	if err != nil {
		return explain(err, o.url, "")
	}
	return unsuccessful(s)
}

// submitInput streams the input as an NDJSON submission, showing the upload's progress.
func submitInput(ctx context.Context, c *client.Client, o submitOptions, line *progress.Line) (wire.Created, error) {
	in, name := os.Stdin, "stdin"
	if o.input != "" && o.input != "-" {
		f, err := os.Open(o.input)
		if err != nil {
			return wire.Created{}, fmt.Errorf("%w: give a readable file, or - for stdin", err)
		}
		defer f.Close()
		in, name = f, o.input
	}
	var size int64
	if fi, err := in.Stat(); err == nil {
		switch {
		case fi.Mode().IsRegular():
			size = fi.Size()
		case fi.Mode()&os.ModeCharDevice != 0:
			line.Note("reading chunks from the terminal, one per line; end with Ctrl-D")
		}
	}
	counted := &countingReader{r: in}
	var body io.Reader = counted
	if !o.ndjson {
		body = client.LinesToNDJSON(counted)
	}
	rec := &errRecorder{r: body}
	progress := startUpload(line, counted, size)
	created, err := c.SubmitNDJSON(ctx, o.header, rec, client.WithTraceparent(o.traceparent))
	progress.stop()
	if rerr := rec.get(); rerr != nil && ctx.Err() == nil {
		return created, fmt.Errorf("reading %s: %w; nothing was submitted", name, rerr)
	}
	return created, explain(err, o.url, "")
}

// errRecorder remembers the first error, other than io.EOF, that reading r returns, so
// that an input error is reported as such rather than as the HTTP request's failure. The
// HTTP transport reads it from its own goroutine.
type errRecorder struct {
	r   io.Reader
	mu  sync.Mutex
	err error
}

func (e *errRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.mu.Lock()
		if e.err == nil {
			e.err = err
		}
		e.mu.Unlock()
	}
	return n, err
}

func (e *errRecorder) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
