package pgtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pollEvery is how often WaitFor asks its condition again.
const pollEvery = 5 * time.Millisecond

// WaitFor asks cond every few milliseconds until it returns "" (the condition holds), and
// returns how long that took. cond returns why the condition does not hold yet; when it
// still does not after timeout, the test fails with what, the timeout and that reason.
// Call it from the test's goroutine. Pick a timeout in seconds, which a busy CI machine
// meets: a passing test does not wait it out.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		why := cond()
		if why == "" {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
		}
		time.Sleep(pollEvery)
	}
}

// Eventually is WaitFor for a condition that gives no reason: the test fails with what
// and the timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return WaitFor(t, timeout, what, func() string {
		if cond() {
			return ""
		}
		return "still false"
	})
}

// Logger returns a logger that writes records of level and above to the test's output,
// so that they show beside the test's own log when it fails or runs with -v.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// Timings are the cluster-wide timing settings (opsq.settings) a test sets, most often
// far shorter than the defaults so that claims move in seconds. A zero field leaves its
// setting as it is.
type Timings struct {
	Renew     time.Duration // claim_renew_interval
	Soft      time.Duration // claim_soft_expiry
	Hard      time.Duration // claim_hard_expiry
	Heartbeat time.Duration // instance_heartbeat_timeout
	Drain     time.Duration // drain_timeout
}

// SetTimings writes tm's non-zero fields to opsq.settings of pool's database, in one
// statement (the settings are checked against each other). Instances started afterwards
// run with them.
func SetTimings(t testing.TB, pool *pgxpool.Pool, tm Timings) {
	t.Helper()
	var keys, values []string
	for _, s := range []struct {
		key string
		d   time.Duration
	}{
		{"claim_renew_interval", tm.Renew},
		{"claim_soft_expiry", tm.Soft},
		{"claim_hard_expiry", tm.Hard},
		{"instance_heartbeat_timeout", tm.Heartbeat},
		{"drain_timeout", tm.Drain},
	} {
		if s.d != 0 {
			keys, values = append(keys, s.key), append(values, s.d.String())
		}
	}
	const update = `UPDATE opsq.settings AS s SET value = v.value
		FROM unnest($1::text[], $2::text[]) AS v (key, value) WHERE s.key = v.key`
	if _, err := pool.Exec(context.Background(), update, keys, values); err != nil {
		t.Fatalf("pgtest: setting the timings %+v: %v", tm, err)
	}
}
