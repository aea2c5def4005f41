package progress

import (
	"strings"
	"testing"
	"time"
)

func TestGroupDigits(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1 000", 312000: "312 000", 1234567: "1 234 567", -1234: "-1 234"} {
		if got := GroupDigits(in); got != want {
			t.Errorf("GroupDigits(%d) = %q; want %q", in, got, want)
		}
	}
}

func TestRoundSignificant(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]int64{0.4: 0, 7.6: 8, 999.4: 999, 312512: 313000, 312499: 312000, 1e6: 1000000, 12345.6: 12300} {
		if got := RoundSignificant(in, 3); got != want {
			t.Errorf("RoundSignificant(%v, 3) = %d; want %d", in, got, want)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 45 << 20: "45.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := Bytes(in); got != want {
			t.Errorf("Bytes(%d) = %q; want %q", in, got, want)
		}
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[time.Duration]string{
		850400 * time.Microsecond: "850ms",
		3210 * time.Millisecond:   "3.2s",
		90400 * time.Millisecond:  "1m30s",
	} {
		if got := Duration(in); got != want {
			t.Errorf("Duration(%v) = %q; want %q", in, got, want)
		}
	}
}

func TestSubmitted(t *testing.T) {
	t.Parallel()
	if got, want := Submitted(1000000, 3200*time.Millisecond), "submitted 1000000 chunks in 3.2s (313 000 chunks/s)"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if got, want := Submitted(0, 12*time.Millisecond), "submitted 0 chunks in 12ms"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestLine(t *testing.T) {
	t.Parallel()
	var tty strings.Builder
	l := &Line{w: &tty, tty: true}
	l.Show("long line")
	l.Show("short")
	l.Clear()
	l.Show("last")
	l.End()
	if got, want := tty.String(), "\rlong line\rshort    \r     \r\rlast\n"; got != want {
		t.Errorf("terminal got %q; want %q", got, want)
	}
	if l.Every() != EveryTTY {
		t.Errorf("terminal redraws every %v; want %v", l.Every(), EveryTTY)
	}

	var plain strings.Builder
	p := &Line{w: &plain}
	p.Show("one")
	p.Show("two")
	p.Clear()
	p.End()
	if got, want := plain.String(), "one\ntwo\n"; got != want {
		t.Errorf("plain got %q; want %q", got, want)
	}
	if p.Every() != EveryPlain {
		t.Errorf("plain prints every %v; want %v", p.Every(), EveryPlain)
	}
}

func TestNote(t *testing.T) {
	t.Parallel()
	var tty strings.Builder
	l := &Line{w: &tty, tty: true}
	l.Show("abc")
	l.Note("done %d", 3)
	if got, want := tty.String(), "\rabc\r   \rdone 3\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	if IsTerminal(&strings.Builder{}) {
		t.Error("a strings.Builder is a terminal")
	}
}
