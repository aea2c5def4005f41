package ui

import (
	"strings"
	"testing"
	"time"

	"opsq/queuer"
)

// TestActivityChart: the minutes of the last 24 h are placed by their time, those older
// left out; the figures add them up, and an idle stretch costs two points, not one each.
func TestActivityChart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 30, 20, 0, time.UTC)
	minute := func(ago int, completed, failed int64) queuer.Minute {
		return queuer.Minute{At: now.Truncate(time.Minute).Add(-time.Duration(ago) * time.Minute), Completed: completed, Failed: failed}
	}
	v := activityChart([]queuer.Minute{
		minute(1440, 999_999, 0), // 24 h ago: out of the chart
		minute(1439, 10, 1),      // the chart's first minute
		minute(90, 1_000, 0),
		minute(59, 2_000, 30), // the last hour's first minute
		minute(1, 1_500, 2),   // the last full minute
		minute(0, 40, 0),      // this minute, so far
	}, now)
	want := chartView{Top: "2\u00a0000", HourTop: "2\u00a0000", CompletedHour: "3\u00a0540", FailedHour: "32",
		CompletedDay: "4\u00a0550", FailedDay: "33", LastMinute: "1\u00a0500"}
	got := v
	got.Completed, got.Failed, got.HourCompleted, got.HourFailed = "", "", "", ""
	if got != want {
		t.Errorf("figures %+v; want %+v", got, want)
	}
	if !strings.HasPrefix(v.Completed, "M0,120 L0,119.4 ") || !strings.HasSuffix(v.Completed, " L1439,117.7 L1439,120 Z") {
		t.Errorf("24 h area %q; want it to start at the first minute and end at this one", v.Completed)
	}
	if !strings.Contains(v.Completed, " L1380,6.0 ") {
		t.Errorf("24 h area %q; want the peak (2 000, 59 minutes ago) at x 1380, the top", v.Completed)
	}
	if n := strings.Count(v.Completed, "L"); n > 20 {
		t.Errorf("24 h area has %d points; want an idle stretch drawn by its ends", n)
	}
	if !strings.HasPrefix(v.HourCompleted, "M0,120 L0,6.0 ") || !strings.HasPrefix(v.HourFailed, "M0,") {
		t.Errorf("last hour: %q and %q; want the peak at its first minute", v.HourCompleted, v.HourFailed)
	}
	empty := activityChart(nil, now)
	if empty.Top != "0" || empty.Completed != "M0,120 L0,120.0 L1439,120.0 L1439,120 Z" || empty.Failed != "M0,120.0 L1439,120.0" {
		t.Errorf("an idle day: %+v; want flat lines at the bottom", empty)
	}
}

// TestConsumerViews: a consumer that named itself nothing is "(unnamed)"; one with nothing
// in flight has no oldest lease.
func TestConsumerViews(t *testing.T) {
	t.Parallel()
	old := 95 * time.Second
	got := consumerViews([]queuer.Consumer{
		{Name: "host-3/pid-77", Inflight: 12_000, OldestLeaseAge: &old, LastSeenAge: 2 * time.Second, Instances: 3},
		{Name: "", LastSeenAge: time.Hour},
	})
	want := []consumerView{
		{Name: "host-3/pid-77", Inflight: 12_000, OldestLease: "1m35s", LastSeen: "2s ago", Instances: 3},
		{Name: "(unnamed)", OldestLease: "—", LastSeen: "1h00m ago"},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("consumerViews = %+v; want %+v", got, want)
	}
}

func TestNumAny(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   any
		want string
	}{{1234, "1\u00a0234"}, {int32(-98765), "-98\u00a0765"}, {int64(1e12), "1\u00a0000\u00a0000\u00a0000\u00a0000"}, {"x", "x"}} {
		if got := numAny(c.in); got != c.want {
			t.Errorf("numAny(%v) = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestValueRateViews: rates are written per second, with their thousands separated once
// whole; a limit in force carries its value's rate, or "—" when the value is not among
// the top ones.
func TestValueRateViews(t *testing.T) {
	t.Parallel()
	for r, want := range map[float64]string{0: "0.00/s", 0.016: "0.02/s", 2.54: "2.5/s", 99.94: "99.9/s", 1234.5: "1\u00a0235/s"} {
		if got := perSecond(r); got != want {
			t.Errorf("perSecond(%v) = %q; want %q", r, got, want)
		}
	}
	rates := []queuer.ValueRate{{Key: "company_id", Value: "7", PerS: 12.5, Count: 750}, {Key: "@tenant", Value: `"acme"`, PerS: 0.5, Count: 30}}
	if got := rateViews(rates); len(got) != 2 || got[0] != (rateView{Key: "company_id", Value: "7", Rate: "12.5/s", Count: "750"}) {
		t.Errorf("rateViews = %+v; want company_id 7 first, at 12.5/s, 750 chunks", got)
	}
	limits := []limitView{{Kind: "rate_limit", Key: "company_id", Value: "7"}, {Kind: "throttle", Key: "company_id", Value: "8"}, {Kind: "throttle", Key: "@tenant", Value: `"acme"`}}
	withRates(limits, rates)
	var got []string
	for _, l := range limits {
		got = append(got, l.Rate)
	}
	if strings.Join(got, " ") != "12.5/s — 0.50/s" {
		t.Errorf("the limits' rates: %q; want [12.5/s — 0.50/s]", got)
	}
}
