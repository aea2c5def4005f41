package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	fs.BoolVar(&o.ndjson, "ndjson", false, "the input is NDJSON: one chunk per line, each a JSON string")
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
	fs.StringVar(&h.Prefix, "prefix", "", "object-storage mode: the chunks are `PREFIX`+index (needs --chunk-count; no input is read)")
	fs.Int64Var(&h.ChunkCount, "chunk-count", 0, "the number of chunks, `N`, with --prefix")
	fs.BoolVar(&o.wait, "wait", false, "after submitting, show progress until the submission finishes; exit with status 1 if it failed or was cancelled")
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return o, err
	}
	o.url, o.key = fs.url, fs.key
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
		created, err = c.Submit(ctx, wire.Submission{SubmissionHeader: o.header})
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
	created, err := c.SubmitNDJSON(ctx, o.header, rec)
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
