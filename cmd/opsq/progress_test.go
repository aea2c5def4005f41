package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"opsq/client"
)

func TestGroupDigits(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1 000", 312000: "312 000", 1234567: "1 234 567", -1234: "-1 234"} {
		if got := groupDigits(in); got != want {
			t.Errorf("groupDigits(%d) = %q; want %q", in, got, want)
		}
	}
}

func TestRoundSignificant(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]int64{0.4: 0, 7.6: 8, 999.4: 999, 312512: 313000, 312499: 312000, 1e6: 1000000, 12345.6: 12300} {
		if got := roundSignificant(in, 3); got != want {
			t.Errorf("roundSignificant(%v, 3) = %d; want %d", in, got, want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 45 << 20: "45.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := formatBytes(in); got != want {
			t.Errorf("formatBytes(%d) = %q; want %q", in, got, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{
		850400 * time.Microsecond: "850ms",
		3210 * time.Millisecond:   "3.2s",
		90400 * time.Millisecond:  "1m30s",
	} {
		if got := formatDuration(in); got != want {
			t.Errorf("formatDuration(%v) = %q; want %q", in, got, want)
		}
	}
}

func TestFormatUpload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		sent, lines, size int64
		elapsed           time.Duration
		want              string
	}{
		{"known size", 45 << 20, 1234567, 120 << 20, 2 * time.Second, "uploading 45.0 MiB of 120.0 MiB (37%), 1 234 567 lines, 22.5 MiB/s"},
		{"unknown size", 2048, 10, 0, time.Second, "uploading 2.0 KiB, 10 lines, 2.0 KiB/s"},
		{"no time yet", 0, 0, 100, 0, "uploading 0 B of 100 B (0%), 0 lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := formatUpload(tt.sent, tt.lines, tt.size, tt.elapsed); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestFormatSubmitted(t *testing.T) {
	t.Parallel()
	if got, want := formatSubmitted(1000000, 3200*time.Millisecond), "submitted 1000000 chunks in 3.2s (313 000 chunks/s)"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if got, want := formatSubmitted(0, 12*time.Millisecond), "submitted 0 chunks in 12ms"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestFormatWait(t *testing.T) {
	t.Parallel()
	s := client.Status{State: client.StateInProgress, ChunksTotal: 10000, ChunksDone: 1234, ChunksFailed: 3}
	if got, want := formatWait(s, 90*time.Second), "in_progress: 1 234 / 10 000 chunks done (12%), 3 failed, 1m30s"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	empty := client.Status{State: client.StateCompleted}
	if got, want := formatWait(empty, time.Second), "completed: 0 / 0 chunks done, 1s"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestLiveLine(t *testing.T) {
	t.Parallel()
	var tty strings.Builder
	l := &liveLine{w: &tty, tty: true}
	l.show("long line")
	l.show("short")
	l.clear()
	l.show("last")
	l.end()
	if got, want := tty.String(), "\rlong line\rshort    \r     \r\rlast\n"; got != want {
		t.Errorf("terminal got %q; want %q", got, want)
	}
	if l.every() != progressEveryTTY {
		t.Errorf("terminal redraws every %v; want %v", l.every(), progressEveryTTY)
	}

	var plain strings.Builder
	p := &liveLine{w: &plain}
	p.show("one")
	p.show("two")
	p.clear()
	p.end()
	if got, want := plain.String(), "one\ntwo\n"; got != want {
		t.Errorf("plain got %q; want %q", got, want)
	}
	if p.every() != progressEveryPlain {
		t.Errorf("plain prints every %v; want %v", p.every(), progressEveryPlain)
	}
}

func TestCountingReader(t *testing.T) {
	t.Parallel()
	c := &countingReader{r: strings.NewReader("a\nbb\n\nccc")}
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatal(err)
	}
	if c.bytes.Load() != 9 || c.lines.Load() != 3 {
		t.Errorf("got %d bytes, %d newlines; want 9 and 3", c.bytes.Load(), c.lines.Load())
	}
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	if isTerminal(&strings.Builder{}) {
		t.Error("a strings.Builder is a terminal")
	}
}
