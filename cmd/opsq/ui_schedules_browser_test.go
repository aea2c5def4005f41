//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestDashboardSchedules drives the schedules page in a real browser against a real
// instance (issue 32): a schedule made over the API is listed with its next runs; Pause,
// through its confirmation, makes the page and the API say paused; Resume undoes it;
// Trigger makes a run whose submission's link, in the last runs, opens that submission's
// page. Then a chain: a child's page links its parent and waits on it, and once the parent
// completed, it waits on nothing and hands its chunk out.
func TestDashboardSchedules(t *testing.T) {
	b := newBrowser(t) // fails, saying what to install, without Chromium
	dbURL := pgtest.NewDB(t)
	admin := createKey(t, dbURL, "schedules-admin", "admin")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = admin
	inst := c.StartN(1)[0]
	ctx := t.Context()
	api, base := inst.Client, inst.URL
	sc, err := api.CreateSchedule(ctx, wire.ScheduleRequest{Name: "nightly-import", Cron: "0 2 * * *", Timezone: "Europe/Amsterdam",
		Submission: []byte(`{"chunks": ["import {{.Date}}"], "metadata": "import of {{.Date}}"}`)})
	if err != nil || len(sc.NextRuns) == 0 {
		t.Fatalf("creating the schedule: %v (next runs %v)", err, sc.NextRuns)
	}

	b.run(t, "opening the schedules", chromedp.Navigate(base+"/ui/schedules"), chromedp.WaitVisible("#key", chromedp.ByQuery))
	b.run(t, "logging in", chromedp.SendKeys("#key", admin, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery), chromedp.WaitVisible("#schedules", chromedp.ByQuery))
	row := b.text(t, "#schedules tbody")
	next := sc.NextRuns[0].UTC().Format(time.RFC3339)
	if !strings.Contains(row, "nightly-import") || !strings.Contains(row, "0 2 * * *") || !strings.Contains(row, next) || !strings.Contains(row, "active") {
		t.Fatalf("the schedules: %q; want nightly-import, active, with its next run %s", row, next)
	}
	b.run(t, "opening the schedule", chromedp.Click(`#schedules a[href$="/nightly-import"]`, chromedp.ByQuery), chromedp.WaitVisible("#schedule", chromedp.ByQuery))
	b.screenshot(t, "schedule-active")

	b.press(t, "#pause", "#resume", "schedule-pause-confirm")
	if got := b.text(t, "#schedule-state"); got != "paused" {
		t.Errorf("the schedule's state after Pause: %q; want paused", got)
	}
	if got, err := api.Schedule(ctx, "", "nightly-import"); err != nil || !got.Paused {
		t.Errorf("the API after Pause: %v, paused %v; want paused", err, got.Paused)
	}
	b.press(t, "#resume", "#pause", "")
	if got := b.text(t, "#schedule-state"); got != "active" {
		t.Errorf("the schedule's state after Resume: %q; want active", got)
	}
	if got, err := api.Schedule(ctx, "", "nightly-import"); err != nil || got.Paused {
		t.Errorf("the API after Resume: %v, paused %v; want not paused", err, got.Paused)
	}
	b.press(t, "#trigger", "#runs a.run-submission", "")
	id := b.text(t, "#runs a.run-submission")
	if got := b.text(t, "#runs tbody tr"); !strings.Contains(got, "submitted") {
		t.Errorf("the last run after Trigger: %q; want submitted", got)
	}
	b.run(t, "opening the run's submission", chromedp.Click("#runs a.run-submission", chromedp.ByQuery), chromedp.WaitVisible("#submission", chromedp.ByQuery))
	var shown string
	b.run(t, "reading the submission's id", chromedp.AttributeValue("#submission", "data-id", &shown, nil, chromedp.ByQuery))
	if shown != id || id == "" {
		t.Errorf("the run's link opened submission %q; want %q", shown, id)
	}
	b.run(t, "setting the width", chromedp.EmulateViewport(390, 900))
	b.open(t, base+"/ui/schedules", "schedules-390", false)
	b.noSideways(t, "the schedules page at 390 px")
	b.run(t, "setting the width", chromedp.EmulateViewport(1280, 900))

	// A chain: the triggered run's submission (chunk "import …") is the parent.
	child, err := api.Submit(ctx, wire.Submission{Chunks: []string{"transform"}, SubmissionHeader: wire.SubmissionHeader{After: []string{id}}})
	if err != nil {
		t.Fatal(err)
	}
	b.open(t, base+"/ui/submissions/"+child.ID, "child-waiting", false)
	if got := b.text(t, "#after a.parent"); got != id {
		t.Errorf("the child's parent link: %q; want %s", got, id)
	}
	if got := b.text(t, "#waiting-on"); got != id {
		t.Errorf("the child waits on %q; want %s", got, id)
	}
	got, err := api.Reserve(ctx, wire.ReserveRequest{Max: 2})
	if err != nil || len(got) != 1 || got[0].SubmissionID != id {
		t.Fatalf("reserve before the parent completed: %v, %+v; want the parent's chunk alone", err, got)
	}
	if _, err := api.Complete(ctx, wire.Completion{Token: got[0].Token, Output: "imported"}); err != nil {
		t.Fatal(err)
	}
	clustertest.PollUntil(t, 30*time.Second, "the child's page to wait on nothing", func() string {
		b.run(t, "reloading the child", chromedp.Navigate(base+"/ui/submissions/"+child.ID), chromedp.WaitVisible("#waiting-on", chromedp.ByQuery))
		if w := b.text(t, "#waiting-on"); w != "none" {
			return "waiting on " + w
		}
		return ""
	})
	if got := b.text(t, "#after"); !strings.Contains(got, "completed") {
		t.Errorf("the child's parent after it completed: %q; want completed", got)
	}
	if got := b.text(t, "#state"); got != "in_progress" {
		t.Errorf("the started child's state: %q; want in_progress", got)
	}
	b.screenshot(t, "child-started")
	started, err := api.Reserve(ctx, wire.ReserveRequest{Max: 1})
	if err != nil || len(started) != 1 || started[0].SubmissionID != child.ID {
		t.Errorf("reserve after the parent completed: %v, %+v; want the child's chunk", err, started)
	}
	b.check(t, "the schedules page and a chain")
}
