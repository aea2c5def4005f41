package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

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

func TestFormatWait(t *testing.T) {
	t.Parallel()
	s := wire.Status{State: wire.StateInProgress, ChunksTotal: 10000, ChunksDone: 1234, ChunksFailed: 3}
	if got, want := formatWait(s, 90*time.Second), "in_progress: 1 234 / 10 000 chunks done (12%), 3 failed, 1m30s"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	empty := wire.Status{State: wire.StateCompleted}
	if got, want := formatWait(empty, time.Second), "completed: 0 / 0 chunks done, 1s"; got != want {
		t.Errorf("got %q; want %q", got, want)
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
