//go:build linux

package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestDashboardValueRates drives the overview in a real browser against a real instance:
// the chunks handed out under a rate_limit are counted per value, and the page shows each
// value's chunks over the last minute and its rate per second, in the table of recent
// rates and beside the throttles and rate limits in force, refreshed by the page's script;
// the values of a key no strategy limits are not listed; nothing scrolls sideways at 390 px.
func TestDashboardValueRates(t *testing.T) {
	b := newBrowser(t)
	dbURL := pgtest.NewDB(t)
	admin := createKey(t, dbURL, "rates-admin", "admin")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = admin
	inst := c.StartN(1)[0]
	ctx := t.Context()
	api, base := inst.Client, inst.URL

	b.run(t, "opening the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible("#key", chromedp.ByQuery))
	b.run(t, "logging in", chromedp.SendKeys("#key", admin, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery), chromedp.WaitVisible("#rates", chromedp.ByQuery))
	if got := b.text(t, "#rates tbody"); !strings.Contains(got, "no chunk of a limited key") {
		t.Errorf("recent rates before any hand-out: %q; want none", got)
	}

	for company, n := range map[int64]int{1: 60, 2: 20} {
		chunks := make([]string, n)
		for i := range chunks {
			chunks[i] = strconv.Itoa(i)
		}
		if _, err := api.Submit(ctx, wire.Submission{Chunks: chunks, SubmissionHeader: wire.SubmissionHeader{
			StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(company), "mode": wire.String("full")}}}); err != nil {
			t.Fatal(err)
		}
	}
	// 30 chunks of company 1 under a slow rate_limit (its bucket stays far from full, so
	// it is listed in force), 10 of company 2 under a quick one; then company 2 is
	// throttled. mode is limited by nothing: never listed.
	reserve := func(strategy string, want int) {
		t.Helper()
		got, err := api.Reserve(ctx, wire.ReserveRequest{Max: want, Strategy: []byte(strategy)})
		if err != nil || len(got) != want {
			t.Fatalf("reserving %s: %v, %d chunks; want %d", strategy, err, len(got), want)
		}
	}
	reserve(`{"rate_limit": {"key": "company_id", "per_second": 0.1, "burst": 40, "then": {"select_only": {"key": "company_id", "value": 1}}}}`, 30)
	reserve(`{"rate_limit": {"key": "company_id", "per_second": 1000, "burst": 1000, "then": {"select_only": {"key": "company_id", "value": 2}}}}`, 10)
	if _, err := api.Throttle(ctx, "company_id", wire.Int(2), time.Hour); err != nil {
		t.Fatal(err)
	}

	// The instance writes its counts every 10 s; the page refreshes itself every 2 s.
	rows := `[...document.querySelectorAll("#rates tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|")).join("\n")`
	got := b.poll(t, 60*time.Second, "the recent rates to list companies 1 and 2", rows, func(v string) bool {
		return strings.Contains(v, "company_id|1|") && strings.Contains(v, "company_id|2|")
	})
	b.screenshot(t, "overview-rates")
	rate := regexp.MustCompile(`^company_id\|([12])\|(\d+(?:\.\d+)?)/s\|(\d+)$`)
	counts := map[string]string{}
	for _, row := range strings.Split(got, "\n") {
		m := rate.FindStringSubmatch(row)
		if m == nil {
			t.Errorf("recent rates: row %q; want company_id|1 or 2|rate/s|chunks (nothing of mode)", row)
			continue
		}
		if r, _ := strconv.ParseFloat(m[2], 64); r <= 0 {
			t.Errorf("recent rates: row %q; want a rate above 0", row)
		}
		counts[m[1]] = m[3]
	}
	if counts["1"] != "30" || counts["2"] != "10" {
		t.Errorf("recent rates: chunks %v; want 30 of company 1 and 10 of company 2", counts)
	}
	// The limits in force carry their value's rate: the rate_limit of company 1, the
	// throttle of company 2.
	limits := b.poll(t, 30*time.Second, "the limits in force to show their rates",
		`[...document.querySelectorAll("#limits tbody tr")].map(r => [r.cells[0].textContent, r.cells[2].textContent, r.cells[5].textContent].join("|")).join("\n")`,
		func(v string) bool {
			return regexp.MustCompile(`(?m)^rate_limit\|1\|[0-9.]+/s$`).MatchString(v) && regexp.MustCompile(`(?m)^throttle\|2\|[0-9.]+/s$`).MatchString(v)
		})
	t.Logf("limits in force:\n%s", limits)

	b.run(t, "setting the width", chromedp.EmulateViewport(390, 900))
	b.open(t, base+"/ui/", "overview-rates-390", true)
	b.noSideways(t, "the overview with rates at 390 px")
	b.check(t, "the overview's rates")
}
