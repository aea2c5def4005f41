package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/progress"
)

// countingReader counts the bytes and lines read through it. The counts may be read from
// another goroutine.
type countingReader struct {
	r            io.Reader
	bytes, lines atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.bytes.Add(int64(n))
	c.lines.Add(int64(bytes.Count(p[:n], []byte{'\n'})))
	return n, err
}

// uploadProgress shows how much of the input has been sent, from a goroutine that lives
// from startUpload to stop.
type uploadProgress struct {
	line  *progress.Line
	in    *countingReader
	size  int64 // input size in bytes, 0 when unknown
	start time.Time
	quit  chan struct{}
	done  chan struct{}
}

func startUpload(line *progress.Line, in *countingReader, size int64) *uploadProgress {
	u := &uploadProgress{line: line, in: in, size: size, start: time.Now(),
		quit: make(chan struct{}), done: make(chan struct{})}
	go u.run()
	return u
}

func (u *uploadProgress) run() {
	defer close(u.done)
	t := time.NewTicker(u.line.Every())
	defer t.Stop()
	for {
		select {
		case <-u.quit:
			u.line.Clear()
			return
		case <-t.C:
			u.line.Show(formatUpload(u.in.bytes.Load(), u.in.lines.Load(), u.size, time.Since(u.start)))
		}
	}
}

// stop ends the display and clears it from a terminal.
func (u *uploadProgress) stop() {
	close(u.quit)
	<-u.done
}

// formatUpload describes an upload in progress: "uploading 45.0 MiB of 120.0 MiB (37%),
// 1 234 567 lines, 12.3 MiB/s". size is 0 when unknown.
func formatUpload(sent, lines, size int64, elapsed time.Duration) string {
	var b strings.Builder
	b.WriteString("uploading " + progress.Bytes(sent))
	if size > 0 {
		fmt.Fprintf(&b, " of %s (%d%%)", progress.Bytes(size), progress.Percent(sent, size))
	}
	fmt.Fprintf(&b, ", %s lines", progress.GroupDigits(lines))
	if s := elapsed.Seconds(); s > 0 {
		fmt.Fprintf(&b, ", %s/s", progress.Bytes(int64(float64(sent)/s)))
	}
	return b.String()
}

// formatWait describes a submission being waited for: "in_progress: 1 234 / 10 000 chunks
// done (12%), 3 failed, 1m30s".
func formatWait(s wire.Status, elapsed time.Duration) string {
	line := fmt.Sprintf("%s: %s / %s chunks done", s.State, progress.GroupDigits(s.ChunksDone), progress.GroupDigits(s.ChunksTotal))
	if s.ChunksTotal > 0 {
		line += fmt.Sprintf(" (%d%%)", progress.Percent(s.ChunksDone, s.ChunksTotal))
	}
	if s.ChunksFailed > 0 {
		line += fmt.Sprintf(", %s failed", progress.GroupDigits(s.ChunksFailed))
	}
	return line + ", " + progress.Duration(elapsed)
}

// Waiting for a submission: each Status call long-polls for statusWait; a failing call is
// retried up to waitRetries times in a row (an instance restarting behind a load balancer),
// with a backoff from 1s doubling up to 10s.
const (
	statusWait  = 30 * time.Second
	waitRetries = 8
)

// waitFinished long-polls the status of submission id until it is finished, showing its
// progress on line, and returns the final status.
func waitFinished(ctx context.Context, c *client.Client, id string, line *progress.Line) (wire.Status, error) {
	start := time.Now()
	var lastShown time.Time
	failures := 0
	for {
		asked := time.Now()
		s, err := c.Status(ctx, id, statusWait)
		if err != nil {
			if !transient(ctx, err) || failures >= waitRetries {
				line.Clear()
				return s, err
			}
			backoff := min(time.Second<<failures, 10*time.Second)
			failures++
			line.Show(fmt.Sprintf("cannot get the status (%v); retrying in %s", err, backoff))
			lastShown = time.Now()
			if err := sleep(ctx, backoff); err != nil {
				line.Clear()
				return s, err
			}
			continue
		}
		failures = 0
		if s.Finished() || time.Since(lastShown) >= line.Every() {
			line.Show(formatWait(s, time.Since(start)))
			lastShown = time.Now()
		}
		if s.Finished() {
			line.End()
			return s, nil
		}
		// A server that answers at once must not make this loop spin.
		if err := sleep(ctx, time.Second-time.Since(asked)); err != nil {
			line.Clear()
			return s, err
		}
	}
}

// transient reports whether a failed call is worth repeating: a network error or a 5xx.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode >= 500
	}
	return true
}

// sleep waits for d or until ctx is done. (clustertest.SleepCtx is the same for the
// tests and the benchmark; the CLI does not depend on the test kit.)
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
