package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"opsq/client"
)

// How often progress is shown: a terminal line is redrawn about 5 times a second; a log
// (stderr redirected to a file or a pipe) gets a plain line at most every 2 seconds.
const (
	progressEveryTTY   = 200 * time.Millisecond
	progressEveryPlain = 2 * time.Second
)

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// liveLine shows a changing status line: redrawn in place with "\r" on a terminal, else
// printed as plain lines. It is not safe for concurrent use.
type liveLine struct {
	w     io.Writer
	tty   bool
	width int // length of the line on the screen (terminal only)
}

func newLiveLine(w io.Writer) *liveLine { return &liveLine{w: w, tty: isTerminal(w)} }

// every returns how often the line should be shown at most.
func (l *liveLine) every() time.Duration {
	if l.tty {
		return progressEveryTTY
	}
	return progressEveryPlain
}

// show replaces the line with s.
func (l *liveLine) show(s string) {
	if !l.tty {
		fmt.Fprintln(l.w, s)
		return
	}
	pad := max(l.width-len(s), 0)
	fmt.Fprintf(l.w, "\r%s%s", s, strings.Repeat(" ", pad))
	l.width = len(s)
}

// clear removes the line from a terminal, so that what follows starts on a clean line.
func (l *liveLine) clear() {
	if l.tty && l.width > 0 {
		fmt.Fprintf(l.w, "\r%s\r", strings.Repeat(" ", l.width))
		l.width = 0
	}
}

// end leaves the line as it is and moves to the next one.
func (l *liveLine) end() {
	if l.tty && l.width > 0 {
		fmt.Fprintln(l.w)
		l.width = 0
	}
}

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
	line  *liveLine
	in    *countingReader
	size  int64 // input size in bytes, 0 when unknown
	start time.Time
	quit  chan struct{}
	done  chan struct{}
}

func startUpload(line *liveLine, in *countingReader, size int64) *uploadProgress {
	u := &uploadProgress{line: line, in: in, size: size, start: time.Now(),
		quit: make(chan struct{}), done: make(chan struct{})}
	go u.run()
	return u
}

func (u *uploadProgress) run() {
	defer close(u.done)
	t := time.NewTicker(u.line.every())
	defer t.Stop()
	for {
		select {
		case <-u.quit:
			u.line.clear()
			return
		case <-t.C:
			u.line.show(formatUpload(u.in.bytes.Load(), u.in.lines.Load(), u.size, time.Since(u.start)))
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
	b.WriteString("uploading " + formatBytes(sent))
	if size > 0 {
		fmt.Fprintf(&b, " of %s (%d%%)", formatBytes(size), percent(sent, size))
	}
	fmt.Fprintf(&b, ", %s lines", groupDigits(lines))
	if s := elapsed.Seconds(); s > 0 {
		fmt.Fprintf(&b, ", %s/s", formatBytes(int64(float64(sent)/s)))
	}
	return b.String()
}

// formatSubmitted is the summary of a submission: "submitted 1000000 chunks in 3.2s
// (312 000 chunks/s)".
func formatSubmitted(chunks int64, elapsed time.Duration) string {
	s := fmt.Sprintf("submitted %d chunks in %s", chunks, formatDuration(elapsed))
	if sec := elapsed.Seconds(); sec > 0 && chunks > 0 {
		s += fmt.Sprintf(" (%s chunks/s)", groupDigits(roundSignificant(float64(chunks)/sec, 3)))
	}
	return s
}

// formatWait describes a submission being waited for: "in_progress: 1 234 / 10 000 chunks
// done (12%), 3 failed, 1m30s".
func formatWait(s client.Status, elapsed time.Duration) string {
	line := fmt.Sprintf("%s: %s / %s chunks done", s.State, groupDigits(s.ChunksDone), groupDigits(s.ChunksTotal))
	if s.ChunksTotal > 0 {
		line += fmt.Sprintf(" (%d%%)", percent(s.ChunksDone, s.ChunksTotal))
	}
	if s.ChunksFailed > 0 {
		line += fmt.Sprintf(", %s failed", groupDigits(s.ChunksFailed))
	}
	return line + ", " + formatDuration(elapsed)
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
func waitFinished(ctx context.Context, c *client.Client, id string, line *liveLine) (client.Status, error) {
	start := time.Now()
	var lastShown time.Time
	failures := 0
	for {
		asked := time.Now()
		s, err := c.Status(ctx, id, statusWait)
		if err != nil {
			if !transient(ctx, err) || failures >= waitRetries {
				line.clear()
				return s, err
			}
			backoff := min(time.Second<<failures, 10*time.Second)
			failures++
			line.show(fmt.Sprintf("cannot get the status (%v); retrying in %s", err, backoff))
			lastShown = time.Now()
			if err := sleep(ctx, backoff); err != nil {
				line.clear()
				return s, err
			}
			continue
		}
		failures = 0
		if s.Finished() || time.Since(lastShown) >= line.every() {
			line.show(formatWait(s, time.Since(start)))
			lastShown = time.Now()
		}
		if s.Finished() {
			line.end()
			return s, nil
		}
		// A server that answers at once must not make this loop spin.
		if err := sleep(ctx, time.Second-time.Since(asked)); err != nil {
			line.clear()
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

// sleep waits for d or until ctx is done.
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

// percent returns 100*n/total rounded down, 0 when total is 0.
func percent(n, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return int64(float64(n) / float64(total) * 100)
}

// formatBytes writes n with a binary unit: "512 B", "1.5 KiB", "45.0 MiB".
func formatBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	i := -1
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// groupDigits writes n with its thousands separated by spaces: "1 234 567".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// roundSignificant rounds x to digits significant digits: 312 512 → 313 000.
func roundSignificant(x float64, digits int) int64 {
	if x < 1 {
		return int64(math.Round(x))
	}
	exp := int(math.Ceil(math.Log10(x))) - digits
	if exp <= 0 {
		return int64(math.Round(x))
	}
	p := int64(math.Pow10(exp))
	return int64(math.Round(x/float64(p))) * p
}

// formatDuration writes d briefly: "850ms", "3.2s", "1m30s".
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
