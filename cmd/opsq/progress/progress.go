// Package progress is how the opsq command shows work in progress to a person: a status
// line redrawn in place on a terminal (printed as plain lines into a log), and numbers,
// sizes and durations written to be read at a glance. The subcommands and the benchmark
// (cmd/opsq/bench) share it.
package progress

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"opsq/api/wire"
)

// How often progress is shown: a terminal line is redrawn about 5 times a second; a log
// (stderr redirected to a file or a pipe) gets a plain line at most every 2 seconds.
const (
	EveryTTY   = 200 * time.Millisecond
	EveryPlain = 2 * time.Second
)

// IsTerminal reports whether w is a character device, such as a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Line shows a changing status line: redrawn in place with "\r" on a terminal, else
// printed as plain lines. It is not safe for concurrent use.
type Line struct {
	w     io.Writer
	tty   bool
	width int // length of the line on the screen (terminal only)
}

// NewLine returns a line written to w, redrawn in place when w is a terminal.
func NewLine(w io.Writer) *Line { return &Line{w: w, tty: IsTerminal(w)} }

// TTY reports whether the line is redrawn in place on a terminal.
func (l *Line) TTY() bool { return l.tty }

// Every returns how often the line should be shown at most.
func (l *Line) Every() time.Duration {
	if l.tty {
		return EveryTTY
	}
	return EveryPlain
}

// Show replaces the line with s.
func (l *Line) Show(s string) {
	if !l.tty {
		fmt.Fprintln(l.w, s)
		return
	}
	pad := max(l.width-len(s), 0)
	fmt.Fprintf(l.w, "\r%s%s", s, strings.Repeat(" ", pad))
	l.width = len(s)
}

// Clear removes the line from a terminal, so that what follows starts on a clean line.
func (l *Line) Clear() {
	if l.tty && l.width > 0 {
		fmt.Fprintf(l.w, "\r%s\r", strings.Repeat(" ", l.width))
		l.width = 0
	}
}

// End leaves the line as it is and moves to the next one.
func (l *Line) End() {
	if l.tty && l.width > 0 {
		fmt.Fprintln(l.w)
		l.width = 0
	}
}

// Note clears the line and prints a line of its own that stays, such as a summary.
func (l *Line) Note(format string, args ...any) {
	l.Clear()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// Submitted is the summary of a submission: "submitted 1000000 chunks in 3.2s
// (312 000 chunks/s)".
func Submitted(chunks int64, elapsed time.Duration) string {
	s := fmt.Sprintf("submitted %d chunks in %s", chunks, Duration(elapsed))
	if sec := elapsed.Seconds(); sec > 0 && chunks > 0 {
		s += fmt.Sprintf(" (%s chunks/s)", GroupDigits(RoundSignificant(float64(chunks)/sec, 3)))
	}
	return s
}

// Percent returns 100*n/total rounded down, 0 when total is 0.
func Percent(n, total int64) int64 {
	if total <= 0 {
		return 0
	}
	return int64(float64(n) / float64(total) * 100)
}

// Bytes writes n with a binary unit: "512 B", "1.5 KiB", "45.0 MiB".
func Bytes(n int64) string {
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

// GroupDigits writes n with its thousands separated by spaces: "1 234 567" (wire.GroupDigits,
// which the dashboard writes its numbers with too).
func GroupDigits(n int64) string { return wire.GroupDigits(n, " ") }

// RoundSignificant rounds x to digits significant digits: 312 512 → 313 000.
func RoundSignificant(x float64, digits int) int64 {
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

// Duration writes d briefly: "850ms", "3.2s", "1m30s".
func Duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}
