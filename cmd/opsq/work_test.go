package main

import (
	"errors"
	"flag"
	"io"
	"math"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

func TestParseWorkArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, o workOptions)
		wantErr error
	}{
		{
			name: "defaults",
			args: []string{"--", "sh", "-c", "tr a-z A-Z"},
			check: func(t *testing.T, o workOptions) {
				if !slices.Equal(o.command, []string{"sh", "-c", "tr a-z A-Z"}) {
					t.Errorf("got command %q; want sh -c …", o.command)
				}
				if o.concurrency != 1 || o.lease != 5*time.Minute || o.wait != 20*time.Second || o.once || o.maxOutput != 1<<20 || o.strategy != nil {
					t.Errorf("got %+v; want the defaults", o)
				}
				if !strings.Contains(o.consumer, "/pid-") {
					t.Errorf("got consumer %q; want HOSTNAME/pid-PID", o.consumer)
				}
			},
		},
		{
			name: "every flag",
			args: []string{"--url", "http://q:1", "--concurrency", "8", "--strategy", "oldest_first", "--lease", "1m", "--wait", "5s",
				"--consumer", "me", "--once", "--max-output", "2KiB", "--", "cat"},
			check: func(t *testing.T, o workOptions) {
				if o.url != "http://q:1" || o.concurrency != 8 || string(o.strategy) != `"oldest_first"` || o.lease != time.Minute ||
					o.wait != 5*time.Second || o.consumer != "me" || !o.once || o.maxOutput != 2048 || !slices.Equal(o.command, []string{"cat"}) {
					t.Errorf("got %+v; want every flag set", o)
				}
			},
		},
		{
			name: "command without double dash",
			args: []string{"--once", "cat"},
			check: func(t *testing.T, o workOptions) {
				if !o.once || !slices.Equal(o.command, []string{"cat"}) {
					t.Errorf("got once %v, command %q; want true and cat", o.once, o.command)
				}
			},
		},
		{name: "no command", args: []string{"--once"}, wantErr: errUsage},
		{name: "concurrency 0", args: []string{"--concurrency", "0", "cat"}, wantErr: errUsage},
		{name: "lease too short", args: []string{"--lease", "500ms", "cat"}, wantErr: errUsage},
		{name: "wait too long", args: []string{"--wait", "61s", "cat"}, wantErr: errUsage},
		{name: "bad strategy", args: []string{"--strategy", "{oops", "cat"}, wantErr: errUsage},
		{name: "bad max output", args: []string{"--max-output", "0", "cat"}, wantErr: errUsage},
		{name: "no such command", args: []string{"--", "opsq-no-such-command-here"}, wantErr: errUsage},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseWorkArgs(tt.args, io.Discard)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got error %v; want %v", err, tt.wantErr)
			}
			if err == nil {
				tt.check(t, o)
			}
		})
	}
}

func TestStrategyJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "", want: ""},
		{in: "oldest_first", want: `"oldest_first"`},
		{in: " random ", want: `"random"`},
		{in: `"newest_first"`, want: `"newest_first"`},
		{in: `{"select_only": {"key": "company_id", "value": 42, "then": "oldest_first"}}`, want: `{"select_only":{"key":"company_id","value":42,"then":"oldest_first"}}`},
		{in: "or_else(select_only(mode=preview, random), random)", want: `{"or_else":{"first":{"select_only":{"key":"mode","value":"preview","then":"random"}},"fallback":"random"}}`},
		{in: "select_only(company_id=42)", want: `{"select_only":{"key":"company_id","value":42,"then":"random"}}`},
		{in: `{"select_only":`, wantErr: true},
		{in: `"unterminated`, wantErr: true},
		{in: "fastest", wantErr: true},
		{in: "42", wantErr: true},
		{in: "[]", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := strategyJSON(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v; want error %v", err, tt.wantErr)
			}
			if string(got) != tt.want {
				t.Errorf("got %s; want %s", got, tt.want)
			}
		})
	}
}

func TestCommandOutcome(t *testing.T) {
	t.Parallel()
	exitErr := func(t *testing.T, script string) error {
		t.Helper()
		err := exec.Command("sh", "-c", script).Run()
		if err == nil {
			t.Fatalf("sh -c %q succeeded; want an exit error", script)
		}
		return err
	}
	written := func(s string) *capWriter {
		c := &capWriter{max: 10}
		_, _ = c.Write([]byte(s))
		return c
	}
	tests := []struct {
		name        string
		waitErr     error
		stdout      *capWriter
		stderr      string
		wantOutput  string
		wantFailure string
	}{
		{name: "success", stdout: written("HELLO\n"), stderr: "a warning", wantOutput: "HELLO\n"},
		{name: "empty output", stdout: written(""), wantOutput: ""},
		{name: "non-zero exit", waitErr: exitErr(t, "exit 3"), stdout: written("partial"), stderr: "oops", wantFailure: "exit status 3: oops"},
		{name: "non-zero exit, no stderr", waitErr: exitErr(t, "exit 1"), stdout: written(""), wantFailure: "exit status 1"},
		{name: "output too big", waitErr: exitErr(t, "kill -PIPE $$"), stdout: written("01234567890"), stderr: "broken pipe",
			wantFailure: "the output is over --max-output (10 bytes): the command wrote more to stdout"},
		{name: "pipes left open", waitErr: exec.ErrWaitDelay, stdout: written("x"),
			wantFailure: "the command exited, but a process it started kept its stdout or stderr open for 10s"},
		{name: "not UTF-8", stdout: written("\xff\xfe"), wantFailure: "the output is not valid UTF-8: outputs are JSON strings, so encode binary output first (base64, say)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := commandOutcome(tt.waitErr, tt.stdout, tt.stderr, 10)
			if got.output != tt.wantOutput || got.failure != tt.wantFailure || got.gone != "" {
				t.Errorf("got %+v; want output %q, failure %q", got, tt.wantOutput, tt.wantFailure)
			}
		})
	}
}

func TestCapWriter(t *testing.T) {
	t.Parallel()
	c := &capWriter{max: 5}
	if n, err := c.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("got %d, %v; want 3, nil", n, err)
	}
	if n, err := c.Write([]byte("de")); n != 2 || err != nil {
		t.Fatalf("got %d, %v; want 2, nil (exactly the limit)", n, err)
	}
	if _, err := c.Write([]byte("f")); !errors.Is(err, errOverflow) || !c.overflow {
		t.Fatalf("got %v, overflow %v; want errOverflow, true", err, c.overflow)
	}
	if got := c.buf.String(); got != "abcde" {
		t.Errorf("got %q; want abcde", got)
	}
}

func TestTailWriter(t *testing.T) {
	t.Parallel()
	t.Run("short", func(t *testing.T) {
		t.Parallel()
		tw := &tailWriter{max: 10}
		_, _ = io.WriteString(tw, "  oops\n")
		if got := tw.String(); got != "oops" {
			t.Errorf("got %q; want oops", got)
		}
	})
	t.Run("keeps the end", func(t *testing.T) {
		t.Parallel()
		tw := &tailWriter{max: 10}
		for _, s := range []string{"line 1\n", "line 2\n", "the end\n"} {
			_, _ = io.WriteString(tw, s)
		}
		if got := tw.String(); got != "…2\nthe end" {
			t.Errorf("got %q; want %q", got, "…2\nthe end")
		}
	})
	t.Run("cut inside a character", func(t *testing.T) {
		t.Parallel()
		tw := &tailWriter{max: 4}
		_, _ = io.WriteString(tw, "xxé€") // é is 2 bytes, € 3: the tail starts inside é
		if got := tw.String(); got != "…€" {
			t.Errorf("got %q; want %q", got, "…€")
		}
	})
	t.Run("4 KiB", func(t *testing.T) {
		t.Parallel()
		tw := &tailWriter{max: stderrTailMax}
		_, _ = io.WriteString(tw, strings.Repeat("a", 10_000)+"oops")
		got := tw.String()
		if !strings.HasSuffix(got, "oops") || len(got) != stderrTailMax+len("…") {
			t.Errorf("got %d bytes ending %q; want %d ending oops", len(got), got[max(len(got)-4, 0):], stderrTailMax+len("…"))
		}
	})
}

// TestLineMatcher: stderr passes through to the tail untouched; a line matches whole,
// across writes, without its \r\n, and last without a newline; a line is matched on its
// first stderrLineMax bytes only; the first match is kept, and signalled once.
func TestLineMatcher(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^HTTP 429\b|rate limited$`)
	long := strings.Repeat("x", stderrLineMax)
	for _, tc := range []struct {
		name   string
		writes []string
		want   string // the line that matched; "" for none
	}{
		{"none", []string{"HTTP 200\n", "all is well\n"}, ""},
		{"across writes", []string{"starting\nHT", "TP 429 Too", " Many Requests\r\nmore\n"}, "HTTP 429 Too Many Requests"},
		{"last line without a newline", []string{"a\nwe are rate limited"}, "we are rate limited"},
		{"only the line's start", []string{long + " rate limited\n"}, ""},
		{"within the line's start", []string{"HTTP 429 " + long + "\n"}, ("HTTP 429 " + long)[:stderrLineMax]},
		{"the first of two", []string{"HTTP 429 one\n", "HTTP 429 two\n"}, "HTTP 429 one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tail := &tailWriter{max: 1 << 20}
			m := newLineMatcher(re, tail)
			for _, w := range tc.writes {
				if n, err := io.WriteString(m, w); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if got, want := tail.String(), strings.TrimSpace(strings.Join(tc.writes, "")); got != want {
				t.Errorf("the tail holds %q; want everything written, %q", got, want)
			}
			line, ok := m.end()
			if line != tc.want || ok != (tc.want != "") {
				t.Errorf("matched %q (%v); want %q", line, ok, tc.want)
			}
			hits := len(m.hit)
			if want := map[bool]int{true: 1, false: 0}[ok]; hits != want {
				t.Errorf("signalled %d times; want %d", hits, want)
			}
		})
	}
}

func TestChunkEnv(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/bin", "OPSQ_CHUNK_PREFIX=s3://stale/", "OPSQ_METADATA=stale", "OPSQ_URL=http://q:1", "TRACEPARENT=stale"}
	input := "abc"
	inline := wire.ReservedChunk{SubmissionID: "42", ChunkIndex: 7, Retries: 2, Metadata: "run 7", Input: &input}
	want := []string{"PATH=/bin", "OPSQ_URL=http://q:1", "OPSQ_SUBMISSION_ID=42", "OPSQ_CHUNK_INDEX=7", "OPSQ_RETRIES=2", "OPSQ_METADATA=run 7"}
	if got := chunkEnv(env, inline); !slices.Equal(got, want) {
		t.Errorf("inline: got %q; want %q", got, want)
	}
	prefix := "s3://bucket/run-7/"
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	stored := wire.ReservedChunk{SubmissionID: "43", ChunkIndex: 0, Prefix: &prefix, Traceparent: tp}
	want = []string{"PATH=/bin", "OPSQ_URL=http://q:1", "OPSQ_SUBMISSION_ID=43", "OPSQ_CHUNK_INDEX=0", "OPSQ_RETRIES=0", "OPSQ_METADATA=",
		"OPSQ_CHUNK_PREFIX=s3://bucket/run-7/", "TRACEPARENT=" + tp}
	if got := chunkEnv(env, stored); !slices.Equal(got, want) {
		t.Errorf("object storage: got %q; want %q", got, want)
	}
}

func TestOneLine(t *testing.T) {
	t.Parallel()
	if got := oneLine("exit status 3:\n  oops\n", 100); got != "exit status 3: oops" {
		t.Errorf("got %q; want one line", got)
	}
	if got := oneLine("ééé", 3); got != "é…" {
		t.Errorf("got %q; want %q", got, "é…")
	}
}

func TestExplainConsumerAPI(t *testing.T) {
	t.Parallel()
	notFound := &client.Error{StatusCode: 404, Code: "not_found", Message: "no route POST /v1/reserve"}
	want := `opsq: 404 not_found: no route POST /v1/reserve; is --url (http://q:1) the address of opsq, of a version with the consumer API?`
	if got := explainConsumerAPI(notFound, "http://q:1"); got == nil || got.Error() != want {
		t.Errorf("got %v; want %q", got, want)
	}
	bad := &client.Error{StatusCode: 400, Code: "bad_request", Message: "strategy: unknown"}
	if got := explainConsumerAPI(bad, "http://q:1"); got == nil || !strings.HasSuffix(got.Error(), "fix the request and retry") {
		t.Errorf("got %v; want explain's advice for a 400", got)
	}
}

// TestRateMeter: the progress line's rate is the rate of the last rateWindow while chunks
// finish, and stays there once they stop, rather than falling while the worker idles.
func TestRateMeter(t *testing.T) {
	t.Parallel()
	const tick = 100 * time.Millisecond
	var m rateMeter
	at, finished := time.Unix(1e9, 0), int64(0)
	run := func(d time.Duration, every int) (rates []float64) { // a chunk every `every` ticks (0: none)
		for i := 1; i <= int(d/tick); i++ {
			at = at.Add(tick)
			if every > 0 && i%every == 0 {
				finished++
			}
			rates = append(rates, m.add(at, finished))
		}
		return rates
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < want/20 }
	m.add(at, 0)
	if r := run(20*time.Second, 1); !near(r[len(r)-1], 10) {
		t.Fatalf("rate after 20s of 10 chunks/s = %.2f; want 10", r[len(r)-1])
	}
	for i, r := range run(60*time.Second, 0) {
		if !near(r, 10) {
			t.Fatalf("rate %s after the last chunk = %.2f; want it to stay 10", time.Duration(i+1)*tick, r)
		}
	}
	// Slow work: a chunk every 5s, the window full of it.
	if r := run(30*time.Second, 50); !near(r[len(r)-1], 0.2) {
		t.Errorf("rate after 30s of a chunk every 5s = %.3f; want 0.2", r[len(r)-1])
	}
}
