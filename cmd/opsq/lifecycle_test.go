package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

// The command-line side of the failure lifecycle: submit's lifecycle flags, work's
// --retry-after-exit, and how the worker tells a failed submission from a lost chunk.

func TestParseSubmitLifecycleFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args              []string
		onFailure, policy string // policy: the JSON of on_failure
		backoff           *wire.RetryBackoff
		notBefore         string
		wantFlag          string // not empty: a usage error naming this flag
	}{
		{args: []string{"--on-failure", "continue"}, policy: `"continue"`},
		{args: []string{"--on-failure", "fail_submission"}, policy: `"fail_submission"`},
		{args: []string{"--on-failure", "fail_after:10"}, policy: `{"fail_after":{"chunks":10}}`},
		{args: []string{"--on-failure", "fail_after:5%"}, policy: `{"fail_after":{"fraction":0.05}}`},
		{args: []string{"--on-failure", "fail_after:100%"}, policy: `{"fail_after":{"fraction":1}}`},
		{args: []string{"--backoff-initial", "0s"}, backoff: &wire.RetryBackoff{Initial: "0s"}},
		{args: []string{"--backoff-initial", "2s", "--backoff-factor", "1.5", "--backoff-max", "10m"},
			backoff: &wire.RetryBackoff{Initial: "2s", Factor: 1.5, Max: "10m0s"}},
		{args: []string{"--not-before", "10m"}, notBefore: "10m"},
		{args: []string{"--not-before", "2026-01-02T15:04:05Z"}, notBefore: "2026-01-02T15:04:05Z"},
		{args: []string{"--on-failure", "sometimes"}, wantFlag: "-on-failure"},
		{args: []string{"--on-failure", "fail_after:-1"}, wantFlag: "-on-failure"},
		{args: []string{"--on-failure", "fail_after:0%"}, wantFlag: "-on-failure"},
		{args: []string{"--on-failure", "fail_after:101%"}, wantFlag: "-on-failure"},
		{args: []string{"--on-failure", "fail_after:x"}, wantFlag: "-on-failure"},
		{args: []string{"--backoff-initial", "-1s"}, wantFlag: "--backoff-initial"},
		{args: []string{"--backoff-initial", "25h"}, wantFlag: "--backoff-initial"},
		{args: []string{"--backoff-factor", "0"}, wantFlag: "--backoff-factor"},
		{args: []string{"--backoff-max", "0s"}, wantFlag: "--backoff-max"},
		{args: []string{"--not-before", "tomorrow"}, wantFlag: "--not-before"},
		{args: []string{"--not-before", "-5m"}, wantFlag: "--not-before"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var stderr strings.Builder
			o, err := parseSubmitArgs(tc.args, &stderr)
			if tc.wantFlag != "" {
				if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tc.wantFlag) {
					t.Errorf("got %v, stderr %q; want a usage error naming %s", err, stderr.String(), tc.wantFlag)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v (%s)", err, stderr.String())
			}
			h := o.header
			if tc.policy != "" && string(h.OnFailure) != tc.policy {
				t.Errorf("on_failure %s; want %s", h.OnFailure, tc.policy)
			}
			if tc.backoff != nil && (h.RetryBackoff == nil || *h.RetryBackoff != *tc.backoff) {
				t.Errorf("retry_backoff %+v; want %+v", h.RetryBackoff, tc.backoff)
			}
			if h.NotBefore != tc.notBefore {
				t.Errorf("not_before %q; want %q", h.NotBefore, tc.notBefore)
			}
		})
	}
}

func TestParseWorkRetryAfter(t *testing.T) {
	t.Parallel()
	o, err := parseWorkArgs([]string{"--retry-after-exit", "75", "--retry-after-exit", "3", "--retry-after", "30s", "cat"}, io.Discard)
	if err != nil || !o.retryAfterExit[75] || !o.retryAfterExit[3] || len(o.retryAfterExit) != 2 || o.retryAfter != 30*time.Second {
		t.Errorf("got %+v, %v; want exits 3 and 75 with 30s", o, err)
	}
	for _, tc := range []struct {
		args     []string
		wantFlag string
	}{
		{[]string{"--retry-after-exit", "75", "cat"}, "--retry-after-exit needs --retry-after"},
		{[]string{"--retry-after", "30s", "cat"}, "--retry-after goes with --retry-after-exit"},
		{[]string{"--retry-after-exit", "0", "--retry-after", "30s", "cat"}, "-retry-after-exit"},
		{[]string{"--retry-after-exit", "256", "--retry-after", "30s", "cat"}, "-retry-after-exit"},
		{[]string{"--retry-after-exit", "75", "--retry-after", "25h", "cat"}, "--retry-after 25h0m0s"},
		{[]string{"--retry-after-exit", "75", "--retry-after", "-1s", "cat"}, "--retry-after"},
	} {
		var stderr strings.Builder
		if _, err := parseWorkArgs(tc.args, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tc.wantFlag) {
			t.Errorf("%q: got %v, stderr %q; want a usage error saying %q", tc.args, err, stderr.String(), tc.wantFlag)
		}
	}
}

func TestParseWorkThrottle(t *testing.T) {
	t.Parallel()
	o, err := parseWorkArgs([]string{"--throttle-on-exit", "75", "--throttle-key", "company_id", "--throttle-for", "30s", "cat"}, io.Discard)
	if err != nil || !o.throttleOnExit[75] || o.throttleKey != "company_id" || o.throttleFor != 30*time.Second {
		t.Errorf("got %+v, %v; want exit 75 throttling company_id for 30s", o, err)
	}
	o, err = parseWorkArgs([]string{"--throttle-on-stderr", `\b429\b`, "--throttle-key", "@tenant", "--throttle-for", "1m", "cat"}, io.Discard)
	if err != nil || o.throttleOnStderr == nil || !o.throttleOnStderr.MatchString("HTTP 429 Too Many Requests") || o.throttleKey != "@tenant" || o.throttleFor != time.Minute {
		t.Errorf("got %+v, %v; want a stderr line matching \\b429\\b throttling @tenant for 1m", o, err)
	}
	for _, tc := range []struct {
		args     []string
		wantFlag string
	}{
		{[]string{"--throttle-on-exit", "75", "cat"}, "--throttle-on-exit needs --throttle-key"},
		{[]string{"--throttle-on-exit", "75", "--throttle-key", "k", "cat"}, "--throttle-for"},
		{[]string{"--throttle-key", "k", "--throttle-for", "30s", "cat"}, "go with --throttle-on-exit"},
		{[]string{"--throttle-on-exit", "0", "--throttle-key", "k", "--throttle-for", "30s", "cat"}, "-throttle-on-exit"},
		{[]string{"--throttle-on-exit", "75", "--throttle-key", "k", "--throttle-for", "2h", "cat"}, "--throttle-for 2h0m0s"},
		{[]string{"--throttle-on-exit", "75", "--throttle-key", "k", "--throttle-for", "500ms", "cat"}, "--throttle-for 500ms"},
		{[]string{"--throttle-on-stderr", "429", "cat"}, "--throttle-on-stderr needs --throttle-key"},
		{[]string{"--throttle-on-stderr", "429", "--throttle-key", "k", "cat"}, "--throttle-for"},
		{[]string{"--throttle-on-stderr", "(", "--throttle-key", "k", "--throttle-for", "30s", "cat"}, "-throttle-on-stderr"},
		{[]string{"--throttle-on-stderr", "a", "--throttle-on-stderr", "b", "--throttle-key", "k", "--throttle-for", "30s", "cat"}, "join the expressions with |"},
	} {
		var stderr strings.Builder
		if _, err := parseWorkArgs(tc.args, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tc.wantFlag) {
			t.Errorf("%q: got %v, stderr %q; want a usage error saying %q", tc.args, err, stderr.String(), tc.wantFlag)
		}
	}
}

func TestSubmissionEnded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    wire.Status
		want string
	}{
		{wire.Status{ID: "5", State: wire.StateFailed, Failure: &wire.Failure{ChunkIndex: ptr(int64(3)), Error: "boom\nbang"}}, "submission 5 failed (chunk 3: boom bang)"},
		{wire.Status{ID: "5", State: wire.StateFailed}, "submission 5 failed"},
		{wire.Status{ID: "5", State: wire.StateCancelled}, "submission 5 was cancelled"},
		{wire.Status{ID: "5", State: wire.StateCompleted}, ""},
		{wire.Status{ID: "5", State: wire.StateInProgress}, ""},
	} {
		if got := submissionEnded(tc.s); got != tc.want {
			t.Errorf("%s: got %q; want %q", tc.s.State, got, tc.want)
		}
	}
}

func TestLifecycleCommandsArgs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, run := range map[string]func(context.Context, []string, io.Writer, io.Writer) error{
		"failures": runFailures, "retry": runRetry, "pause": runPause, "resume": runResume,
	} {
		for _, args := range [][]string{nil, {"1", "2"}, {"--nope", "1"}} {
			var stderr strings.Builder
			if err := run(ctx, args, io.Discard, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "usage: opsq "+name) {
				t.Errorf("opsq %s %q: got %v, stderr %q; want a usage error", name, args, err, stderr.String())
			}
		}
	}
	var stderr strings.Builder
	if err := runRetry(ctx, []string{"--max-retries", "-1", "1"}, io.Discard, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "-max-retries") {
		t.Errorf("opsq retry --max-retries -1: got %v, stderr %q; want a usage error naming it", err, stderr.String())
	}
	stderr.Reset()
	if err := runFailures(ctx, []string{"--limit", "-1", "1"}, io.Discard, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), "--limit") {
		t.Errorf("opsq failures --limit -1: got %v, stderr %q; want a usage error naming it", err, stderr.String())
	}
}
