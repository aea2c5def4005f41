//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestDashboardLiftThrottle drives the overview in a real browser against a real instance
// (issue 33): a throttle in force lists who set it, its Lift button leads to a
// confirmation page, and Confirm lifts it: the overview no longer lists it, and its value's
// chunk is handed out at once; nothing scrolls sideways at 390 px.
func TestDashboardLiftThrottle(t *testing.T) {
	b := newBrowser(t)
	dbURL := pgtest.NewDB(t)
	admin := createKey(t, dbURL, "lift-admin", "admin")
	consumer := createKey(t, dbURL, "lift-consumer", "consumer")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = admin
	inst := c.StartN(1)[0]
	ctx := t.Context()
	api, base := inst.Client, inst.URL
	if _, err := api.Submit(ctx, wire.Submission{Chunks: []string{"held"}, SubmissionHeader: wire.SubmissionHeader{
		StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(9)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(base, client.WithKey(consumer)).Throttle(ctx, "company_id", wire.Int(9), time.Hour); err != nil {
		t.Fatal(err)
	}

	b.run(t, "opening the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible("#key", chromedp.ByQuery))
	b.run(t, "logging in", chromedp.SendKeys("#key", admin, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery), chromedp.WaitVisible("#limits", chromedp.ByQuery))
	row := b.text(t, "#limits tbody")
	if !strings.Contains(row, "company_id") || !strings.Contains(row, "set by lift-consumer at ") || !strings.Contains(row, "Lift…") {
		t.Fatalf("the limits in force: %q; want the throttle of company_id 9, set by lift-consumer, with Lift…", row)
	}
	// After a refresh by the page's script too (app.js draws the rows again).
	b.waitRefreshed(t)
	b.press(t, `#limits a.button.danger`, "#limits", "throttle-lift-confirm")
	if got := b.text(t, "#limits tbody"); !strings.Contains(got, "none in force") {
		t.Errorf("the limits in force after Lift: %q; want none", got)
	}
	got, err := api.Reserve(ctx, wire.ReserveRequest{Max: 1})
	if err != nil || len(got) != 1 {
		t.Errorf("reserve after the lift: %v, %d chunks; want the held chunk", err, len(got))
	}

	b.run(t, "setting the width", chromedp.EmulateViewport(390, 900))
	b.open(t, base+"/ui/", "overview-after-lift-390", true)
	b.noSideways(t, "the overview at 390 px")
	b.check(t, "the lift of a throttle")
}
