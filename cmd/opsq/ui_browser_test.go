//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// browserNames are the executables of a Chromium-based browser that chromedp can drive.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// findBrowser returns the browser to drive: $OPSQ_TEST_BROWSER, else the first of
// browserNames on the PATH.
func findBrowser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OPSQ_TEST_BROWSER"); p != "" {
		return p
	}
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no browser to test the dashboard with: none of %s is on the PATH. Install Debian's chromium (apt-get install -y chromium; .ci/run does) or set OPSQ_TEST_BROWSER to a Chromium or Chrome executable", strings.Join(browserNames, ", "))
	return ""
}

// browser is a headless Chromium tab that records every console error, uncaught exception
// and failed request of the pages it loads.
type browser struct {
	ctx  context.Context
	shot string // the screenshot folder
	docs string // $OPSQ_SCREENSHOTS: where the screenshots of the docs go; "" for none
	mu   sync.Mutex
	bad  []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(findBrowser(t)), chromedp.NoSandbox, chromedp.WindowSize(1440, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	dir, err := os.MkdirTemp("", "opsq-ui-screenshots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of every page: %s", dir)
	b := &browser{ctx: ctx, shot: dir, docs: os.Getenv("OPSQ_SCREENSHOTS")}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				b.problem("console error: %s", strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			b.problem("uncaught exception: %s", ev.ExceptionDetails.Error())
		case *network.EventLoadingFailed:
			if !ev.Canceled {
				b.problem("request failed: %s (%s)", ev.RequestID, ev.ErrorText)
			}
		case *network.EventResponseReceived:
			if ev.Response.Status >= 400 {
				b.problem("request answered %d: %s", ev.Response.Status, ev.Response.URL)
			}
		}
	})
	if err := chromedp.Run(ctx, network.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("starting the browser: %v", err)
	}
	return b
}

func (b *browser) problem(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bad = append(b.bad, fmt.Sprintf(format, args...))
}

// check fails the test with the problems seen since the last check.
func (b *browser) check(t *testing.T, what string) {
	t.Helper()
	b.mu.Lock()
	bad := b.bad
	b.bad = nil
	b.mu.Unlock()
	for _, p := range bad {
		t.Errorf("%s: %s", what, p)
	}
}

// run runs actions with a deadline.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// open loads url, waits until its script has refreshed it once from the server (pages
// with live updates) and writes a screenshot named name.
func (b *browser) open(t *testing.T, url, name string, live bool) {
	t.Helper()
	b.run(t, "opening "+url, chromedp.Navigate(url), chromedp.WaitReady("main", chromedp.ByQuery))
	if live {
		b.waitRefreshed(t)
	}
	b.screenshot(t, name)
}

// waitRefreshed waits until the page's script has refreshed it from the server again.
func (b *browser) waitRefreshed(t *testing.T) {
	t.Helper()
	var before string
	b.run(t, "reading the refresh mark", chromedp.Evaluate(`document.body.dataset.refreshed || ""`, &before))
	b.poll(t, 30*time.Second, "the page to refresh itself", `document.body.dataset.refreshed || ""`, func(v string) bool { return v != "" && v != before })
}

func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	var png []byte
	b.run(t, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(b.shot, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// doc writes a screenshot of the page for the docs, as $OPSQ_SCREENSHOTS/name.png, when
// that variable names a folder (OPSQ_SCREENSHOTS=$PWD/docs refreshes docs/dashboard-*.png).
func (b *browser) doc(t *testing.T, name string) {
	t.Helper()
	if b.docs == "" {
		return
	}
	var png []byte
	b.run(t, "screenshot "+name, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(b.docs, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// reachable checks that every element sel matches that is not hidden can be seen and
// clicked once scrolled into view: inside the window, not covered by another element.
// It fails when sel matches nothing visible.
func (b *browser) reachable(t *testing.T, what, sel string) {
	t.Helper()
	for _, p := range b.unreachable(t, sel) {
		t.Errorf("%s: %s", what, p)
	}
}

// unreachable says what is wrong with the elements sel matches (reachable).
func (b *browser) unreachable(t *testing.T, sel string) []string {
	t.Helper()
	var problems []string
	b.run(t, "checking "+sel, chromedp.Evaluate(`(() => {
  const els = [...document.querySelectorAll(`+strconv.Quote(sel)+`)].filter(e => !e.closest("[hidden]"));
  if (els.length === 0) return ["nothing matches"];
  const out = [];
  for (const e of els) {
    e.scrollIntoView({block: "center", inline: "center"});
    const r = e.getBoundingClientRect();
    const name = (e.id ? "#" + e.id : e.tagName.toLowerCase()) + " " + JSON.stringify(e.textContent.trim());
    if (r.width === 0 || r.height === 0) { out.push(name + " has no size"); continue; }
    if (r.left < 0 || r.top < 0 || r.right > window.innerWidth || r.bottom > window.innerHeight) {
      out.push(name + " is outside the window: " + JSON.stringify([r.left, r.top, r.right, r.bottom]) + " in " + window.innerWidth + "x" + window.innerHeight);
      continue;
    }
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!hit || !(hit === e || e.contains(hit))) out.push(name + " is covered by " + (hit ? hit.outerHTML.slice(0, 80) : "nothing"));
  }
  window.scrollTo(0, 0);
  return out;
})()`, &problems))
	return problems
}

// text returns the text of the element sel.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	var s string
	b.run(t, "reading "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return strings.TrimSpace(s)
}

// poll evaluates expr until ok accepts its value (a string), or fails after timeout.
func (b *browser) poll(t *testing.T, timeout time.Duration, what, expr string, ok func(string) bool) string {
	t.Helper()
	var got string
	clustertest.PollUntil(t, timeout, what, func() string {
		if err := chromedp.Run(b.ctx, chromedp.Evaluate(expr, &got)); err != nil {
			return err.Error()
		}
		if ok(got) {
			return ""
		}
		return fmt.Sprintf("%s is %q", expr, got)
	})
	return got
}

// bearer adds an API key to every request it sends.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// TestDashboard drives the dashboard (/ui/) in a real browser against 2 real instances
// that require API keys: it asks for an admin key once and keeps it in an HttpOnly,
// SameSite=Strict cookie; each page loads without a console error or a failed request,
// shows what the API answers, a progress bar moves while consumers work, and Cancel and
// Drain from the pages do what they say. Screenshots of every page go to the folder named
// in the log.
func TestDashboard(t *testing.T) {
	b := newBrowser(t)
	dbURL := pgtest.NewDB(t)
	admin, consumer := createKey(t, dbURL, "ui-admin", "admin"), createKey(t, dbURL, "ui-consumer", "consumer")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = admin
	insts := c.StartN(2)
	ctx := t.Context()
	api := insts[0].Client
	base := insts[0].URL

	// The key, asked for once: a consumer's key is refused, an admin key kept in a cookie
	// that scripts cannot read.
	b.run(t, "opening the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible("#key", chromedp.ByQuery))
	b.screenshot(t, "login")
	b.run(t, "logging in with a consumer key", chromedp.SendKeys("#key", consumer, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery), chromedp.WaitVisible("#error", chromedp.ByQuery))
	if got := b.text(t, "#error"); !strings.Contains(got, "admin") {
		t.Errorf("login with a consumer key says %q; want it to ask for an admin key", got)
	}
	b.run(t, "logging in with an admin key", chromedp.SendKeys("#key", admin, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery), chromedp.WaitVisible("#in-progress", chromedp.ByQuery))
	var cookies []*network.Cookie
	b.run(t, "reading the cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{base + "/ui/"}).Do(ctx)
		return err
	}))
	if len(cookies) != 1 || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict || cookies[0].Path != "/ui/" {
		t.Errorf("cookies after the login: %+v; want one, HttpOnly, SameSite=Strict, for /ui/", cookies)
	}
	var visible string
	b.run(t, "reading document.cookie", chromedp.Evaluate(`document.cookie`, &visible))
	if strings.Contains(visible, admin) {
		t.Errorf("document.cookie shows the key; want it out of scripts' reach")
	}
	b.check(t, "login")

	l := clustertest.NewLedger()
	submit := func(n int, company int64, prio int64) string {
		chunks := make([]string, n)
		for i := range chunks {
			chunks[i] = strconv.Itoa(i)
		}
		created, err := api.Submit(ctx, wire.Submission{Chunks: chunks, SubmissionHeader: wire.SubmissionHeader{
			Metadata: "dashboard test", Priority: prio, StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(company)}}})
		if err != nil {
			t.Fatalf("submitting: %v", err)
		}
		l.AddSubmission(created.ID, int64(n))
		return created.ID
	}
	big := submit(1500, 1, 0) // still at work when the pages are looked at, at both widths
	small := submit(60, 2, 5)
	doomed := submit(100, 3, 0)
	// One submission fails: its one chunk, reserved by its company, fails for good.
	zero := 0
	failing, err := api.Submit(ctx, wire.Submission{Chunks: []string{"x"}, SubmissionHeader: wire.SubmissionHeader{
		MaxRetries: &zero, StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(9)}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := api.Reserve(ctx, wire.ReserveRequest{Strategy: []byte(`{"select_only": {"key": "company_id", "value": 9}}`)})
	if err != nil || len(got) != 1 {
		t.Fatalf("reserving the chunk to fail: %v, %d chunks", err, len(got))
	}
	no := false
	if _, err := api.Fail(ctx, wire.ChunkFailure{Token: got[0].Token, Error: "boom", Retry: &no}); err != nil {
		t.Fatal(err)
	}

	// Overview: the numbers are the API's, with nothing in flight.
	b.open(t, base+"/ui/", "overview-idle", true)
	page, err := api.List(ctx, client.ListOptions{State: wire.StateInProgress})
	if err != nil {
		t.Fatal(err)
	}
	var left int64
	for _, s := range page.Submissions {
		left += s.ChunksTotal - s.ChunksDone
	}
	if got, want := b.text(t, "#in-progress"), strconv.Itoa(len(page.Submissions)); got != want {
		t.Errorf("overview: %s submissions in progress; the API lists %s", got, want)
	}
	if got, want := b.text(t, "#chunks-waiting"), wire.GroupDigits(left, "\u00a0"); got != want || !strings.Contains(got, "\u00a0") {
		t.Errorf("overview: %q chunks pending; the API's submissions leave %q (want thousands separated)", got, want)
	}
	if got := b.text(t, "#inflight"); got != "0" {
		t.Errorf("overview: %s chunks in flight with no consumer; want 0", got)
	}
	if got := b.text(t, "#oldest-id"); got != big {
		t.Errorf("overview: oldest submission %s; want %s", got, big)
	}
	failed, err := api.List(ctx, client.ListOptions{State: wire.StateFailed})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.text(t, "#failed-last-hour"), strconv.Itoa(len(failed.Submissions)); got != want || want != "1" {
		t.Errorf("overview: %s submissions failed in the last hour; the API lists %s (want 1)", got, want)
	}
	if got := b.text(t, "#live-count"); got != "2" {
		t.Errorf("overview: %s instances live; want 2", got)
	}
	b.check(t, "overview")

	// Submissions: every row, and the filter by strategic metadata.
	b.open(t, base+"/ui/submissions", "submissions", true)
	var rows int
	b.run(t, "counting rows", chromedp.Evaluate(`document.querySelectorAll("#submissions tr[data-id]").length`, &rows))
	if rows != 4 {
		t.Errorf("submissions page: %d rows; want 4", rows)
	}
	b.open(t, base+"/ui/submissions/"+failing.ID, "submission-failed", true)
	if got := b.text(t, "#failure"); !strings.Contains(got, "boom") {
		t.Errorf("failed submission's page shows failure %q; want the error boom", got)
	}
	b.open(t, base+"/ui/submissions?key=company_id&value=2", "submissions-filtered", true)
	var ids []string
	b.run(t, "reading ids", chromedp.Evaluate(`[...document.querySelectorAll("#submissions tr[data-id]")].map(r => r.dataset.id)`, &ids))
	if !slices.Equal(ids, []string{small}) {
		t.Errorf("submissions with company_id = 2: %v; want [%s]", ids, small)
	}
	b.check(t, "submissions")

	// Strategy preview: the page shows what POST /v1/reserve/preview answers.
	const text = "select_only(company_id=2, oldest_first)"
	b.open(t, base+"/ui/strategy?strategy="+strings.ReplaceAll(text, " ", "+")+"&max=5", "strategy", false)
	want, err := api.Preview(ctx, wire.ReserveRequest{Max: 5, Strategy: []byte(`{"select_only": {"key": "company_id", "value": 2, "then": "oldest_first"}}`)})
	if err != nil {
		t.Fatalf("POST /v1/reserve/preview: %v", err)
	}
	var shown []string
	b.run(t, "reading the preview", chromedp.Evaluate(`[...document.querySelectorAll("#chunks tbody tr")].map(r => r.cells[1].textContent + "/" + r.cells[2].textContent)`, &shown))
	var wantShown []string
	for _, ch := range want {
		wantShown = append(wantShown, fmt.Sprintf("%s/%d", ch.SubmissionID, ch.ChunkIndex))
	}
	if len(wantShown) != 5 || !slices.Equal(shown, wantShown) {
		t.Errorf("strategy preview shows %v; POST /v1/reserve/preview answers %v (want 5 chunks of %s, in chunk order)", shown, wantShown, small)
	}
	b.open(t, base+"/ui/strategy?strategy=prefer_distinct(company_id)", "strategy-error", false)
	if got := b.text(t, "#error-path"); !strings.HasPrefix(got, "strategy") {
		t.Errorf("strategy error path: %q; want a path starting with strategy", got)
	}
	b.check(t, "strategy preview")

	// Cancel from the detail page.
	b.open(t, base+"/ui/submissions/"+doomed, "submission-before-cancel", true)
	b.run(t, "cancelling", chromedp.Click("#cancel", chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	b.screenshot(t, "confirm-cancel")
	b.run(t, "confirming", chromedp.Click("#confirm", chromedp.ByQuery), chromedp.WaitVisible("#submission", chromedp.ByQuery))
	if got := b.text(t, "#state"); got != "cancelled" {
		t.Errorf("after Cancel, the page says %q; want cancelled", got)
	}
	if st, err := api.Status(ctx, doomed, 0); err != nil || st.State != wire.StateCancelled {
		t.Errorf("after Cancel from the page, the API says %v (%v); want cancelled", st.State, err)
	}
	b.check(t, "cancel")

	// A progress bar moves while consumers work.
	b.open(t, base+"/ui/submissions/"+big, "submission", true)
	start := b.poll(t, 5*time.Second, "the progress bar", `document.querySelector(".bar").dataset.done`, func(string) bool { return true })
	tg := clustertest.NewTargets(clustertest.URLs(insts...)...)
	keyed := &http.Client{Transport: bearer{key: admin, next: c.HTTP.Transport}}
	cs := clustertest.RunConsumers(t, keyed, l, clustertest.ConsumerConfig{N: 2, Targets: tg, Max: 2, Work: 200 * time.Millisecond})
	moved := b.poll(t, 30*time.Second, "the progress bar to move", `document.querySelector(".bar").dataset.done`, func(v string) bool {
		n, _ := strconv.Atoi(v)
		s, _ := strconv.Atoi(start)
		return n > s
	})
	b.screenshot(t, "submission-moving")
	t.Logf("progress bar of %s: %s then %s chunks done", big, start, moved)
	// The overview: the completions per minute, which every instance adds to PostgreSQL
	// every 10 s, and who is working (the consumers' names, chunks in flight, oldest lease).
	b.open(t, base+"/ui/", "overview-start", true)
	b.poll(t, 60*time.Second, "the chart to count completions in the last hour", `document.getElementById("completed-hour").textContent`,
		func(v string) bool { return v != "" && v != "0" })
	b.poll(t, 30*time.Second, "the chart to draw them", `document.getElementById("chart-completed").getAttribute("d").split(" ").some(p => parseFloat(p.split(",")[1]) < 119) + ""`,
		func(v string) bool { return v == "true" })
	b.poll(t, 60*time.Second, "who is working to list both consumers", `[...document.querySelectorAll("#consumers tbody tr")].map(r => r.cells[0].textContent).sort().join(" ")`,
		func(v string) bool { return strings.Contains(v, "consumer-1 consumer-2") }) // and "(unnamed)": this test's own reserves
	b.poll(t, 60*time.Second, "who is working to show the consumers' chunks in flight and oldest lease",
		`[...document.querySelectorAll("#consumers tbody tr")].filter(r => r.cells[0].textContent.startsWith("consumer-") && r.cells[1].textContent !== "0" && r.cells[2].textContent !== "—").length + ""`,
		func(v string) bool { return v != "0" })
	docShots(t, b, base, big)
	var working []string
	b.run(t, "reading who is working", chromedp.Evaluate(`[...document.querySelectorAll("#consumers tbody tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`, &working))
	for _, row := range working {
		cells := strings.Split(row, "|")
		if len(cells) != 5 || !strings.HasSuffix(cells[3], "s ago") {
			t.Errorf("who is working: row %q; want consumer|in flight|oldest lease|last seen (…s ago)|instances", row)
		}
	}
	b.screenshot(t, "overview")
	b.check(t, "progress")

	// Every page at 1 440 and 390 px: nothing scrolls sideways, and every action — Log out,
	// the submission's buttons, the list's, Drain, Confirm — can be seen and pressed.
	kept := submit(3, 8, 0)
	if _, err := api.Pause(ctx, kept); err != nil {
		t.Fatal(err)
	}
	// A consumer with a long name, and no space to break it at: seen (it asked), holding
	// nothing (kept is paused). The pages must still not scroll sideways.
	long := strings.Repeat("render-farm-eu-west-", 12) + "pid-4242"
	if got, err := api.Reserve(ctx, wire.ReserveRequest{Consumer: long, Strategy: []byte(`{"select_only": {"key": "company_id", "value": 8}}`)}); err != nil || len(got) != 0 {
		t.Fatalf("reserving from the paused submission: %v, %d chunks; want none", err, len(got))
	}
	b.open(t, base+"/ui/", "overview-long-name", true)
	b.poll(t, 60*time.Second, "who is working to list the long name", `[...document.querySelectorAll("#consumers tbody tr")].map(r => r.cells[0].textContent).join(" ")`,
		func(v string) bool { return strings.Contains(v, long) })
	for _, w := range []int64{1440, 390} {
		b.run(t, "setting the width", chromedp.EmulateViewport(w, 900))
		everyPage(t, b, base, w, pages{big: big, paused: kept, failed: failing.ID, drainable: insts[1].ID})
	}
	if _, err := api.Resume(ctx, kept); err != nil {
		t.Fatal(err)
	}
	b.run(t, "setting the width", chromedp.EmulateViewport(1440, 900))

	// Cluster: the shard map is /v1/cluster's; Drain from the page drains.
	b.open(t, base+"/ui/cluster", "cluster", true)
	cl, err := api.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, in := range cl.Instances {
		for _, s := range in.Shards {
			owners[strconv.Itoa(s.Shard)] = in.ID
		}
	}
	var cells map[string]string
	b.run(t, "reading the shard map", chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll(".shard")].map(a => [a.dataset.shard, a.dataset.owner]))`, &cells))
	if len(cells) != cl.ShardCount {
		t.Errorf("shard map: %d cells; want %d", len(cells), cl.ShardCount)
	}
	for s, owner := range owners {
		if cells[s] != owner {
			t.Errorf("shard map: shard %s owned by %q; /v1/cluster says %q", s, cells[s], owner)
		}
	}
	victim := insts[1].ID
	b.run(t, "draining", chromedp.Click(`#instances tr[data-id="`+victim+`"] a.button`, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	b.screenshot(t, "confirm-drain")
	b.run(t, "confirming", chromedp.Click("#confirm", chromedp.ByQuery), chromedp.WaitVisible("#shards", chromedp.ByQuery))
	clustertest.PollUntil(t, 30*time.Second, "the drained instance to hand over its shards", func() string {
		cl, err := api.Cluster(ctx)
		if err != nil {
			return err.Error()
		}
		for _, in := range cl.Instances {
			if in.ID == victim && (!in.Draining || len(in.Shards) > 0) {
				return fmt.Sprintf("%s: draining %v, %d shards", victim, in.Draining, len(in.Shards))
			}
		}
		return ""
	})
	b.poll(t, 30*time.Second, "the page to show every shard on the other instance", `[...document.querySelectorAll(".shard")].filter(a => a.dataset.owner === "`+insts[0].ID+`").length + ""`,
		func(v string) bool { return v == strconv.Itoa(cl.ShardCount) })
	b.screenshot(t, "cluster-drained")
	b.check(t, "cluster")

	cs.Stop()
	b.open(t, base+"/ui/submissions/"+big, "submission-after", true)
	b.check(t, "last look")

	// The failure lifecycle, on a desktop and on a phone: a submission's failed chunks, and
	// Retry, Pause and Resume of one submission and of a page of the list.
	for i, w := range []int64{1440, 390} {
		b.run(t, "setting the width", chromedp.EmulateViewport(w, 900))
		lifecycleFlow(t, b, api, base, w, int64(100+i))
		bulkFlow(t, b, api, base, w, int64(200+i))
	}
}

// pages are what everyPage looks at: submissions in progress (big, with consumers at
// work), paused and failed, and an instance to drain.
type pages struct {
	big, paused, failed, drainable string
}

// docShots writes the docs' screenshots (OPSQ_SCREENSHOTS) of the overview, big's page
// and the cluster at 1 440 and 390 px, while consumers work on big; nothing without it.
func docShots(t *testing.T, b *browser, base, big string) {
	t.Helper()
	if b.docs == "" {
		return
	}
	for _, w := range []int64{1440, 390} {
		b.run(t, "setting the width", chromedp.EmulateViewport(w, 900))
		suffix := map[int64]string{1440: "", 390: "-390"}[w]
		for path, name := range map[string]string{"/ui/": "dashboard-overview", "/ui/submissions/" + big: "dashboard-submission", "/ui/cluster": "dashboard-shards"} {
			b.open(t, base+path, name+suffix, true)
			b.doc(t, name+suffix)
		}
	}
	b.run(t, "setting the width", chromedp.EmulateViewport(1440, 900))
	b.check(t, "the docs' screenshots")
}

// everyPage opens every page of the dashboard at width px: none scrolls sideways, Log out
// and every action button on it can be seen and pressed.
func everyPage(t *testing.T, b *browser, base string, width int64, ps pages) {
	t.Helper()
	w := strconv.FormatInt(width, 10)
	for _, p := range []struct {
		path, name string
		live       bool
		actions    []string // selectors of the buttons that must be reachable
	}{
		{"/ui/", "overview", true, nil},
		{"/ui/submissions", "submissions", true, []string{"#bulk a.button", "#submissions a"}},
		{"/ui/submissions/" + ps.big, "submission", true, nil},
		{"/ui/submissions/" + ps.paused, "submission-paused", true, []string{"#submission [data-action]"}},
		{"/ui/submissions/" + ps.failed, "submission-failed", true, []string{"#submission [data-action]", "#failures summary"}},
		{"/ui/submissions/" + ps.paused + "/confirm?action=resume", "confirm-resume", false, []string{"#confirm", "#back"}},
		{"/ui/cluster", "cluster", true, []string{"#instances a.button", ".shard"}},
		{"/ui/cluster/confirm?action=drain&target=" + ps.drainable, "confirm-drain", false, []string{"#confirm", "#back"}},
		{"/ui/strategy?strategy=random", "strategy", false, []string{"#preview"}},
		{"/ui/login", "login", false, []string{"#login"}},
	} {
		what := p.name + " at " + w + " px"
		b.open(t, base+p.path, p.name+"-"+w, p.live)
		b.noSideways(t, what)
		if p.name != "login" { // the login page has nobody to log out
			b.reachable(t, "Log out on "+what, "#logout")
		}
		for _, sel := range p.actions {
			b.reachable(t, sel+" on "+what, sel)
		}
		b.check(t, what)
	}
}

// failedSubmission makes a submission of chunks chunks, with no retry, whose first chunk
// fails for good with error msg, which fails it (under the default policy) and skips the
// others. company is its company_id, to reserve its chunk by.
func failedSubmission(t *testing.T, api *client.Client, chunks int, company int64, msg string) string {
	t.Helper()
	ctx := t.Context()
	zero := 0
	in := make([]string, chunks)
	for i := range in {
		in[i] = strconv.Itoa(i)
	}
	created, err := api.Submit(ctx, wire.Submission{Chunks: in, SubmissionHeader: wire.SubmissionHeader{
		MaxRetries: &zero, StrategicMetadata: map[string]wire.MetadataValue{"company_id": wire.Int(company)}}})
	if err != nil {
		t.Fatalf("submitting: %v", err)
	}
	got, err := api.Reserve(ctx, wire.ReserveRequest{Strategy: fmt.Appendf(nil, `{"select_only": {"key": "company_id", "value": %d}}`, company)})
	if err != nil || len(got) != 1 {
		t.Fatalf("reserving the chunk to fail: %v, %d chunks", err, len(got))
	}
	no := false
	if _, err := api.Fail(ctx, wire.ChunkFailure{Token: got[0].Token, Error: msg, Retry: &no}); err != nil {
		t.Fatal(err)
	}
	if st, err := api.Status(ctx, created.ID, 0); err != nil || st.State != wire.StateFailed {
		t.Fatalf("submission %s after its chunk failed: %s (%v); want failed", created.ID, st.State, err)
	}
	return created.ID
}

// reservable reserves (for 1 s) the chunks of company that are reservable now, and says
// how many it got. (Whether a submission is paused is seen by what a reserve hands out:
// the status the API answers in this tree does not carry "paused" yet.)
func reservable(t *testing.T, api *client.Client, company int64) int {
	t.Helper()
	got, err := api.Reserve(t.Context(), wire.ReserveRequest{Max: 10, Lease: "1s",
		Strategy: fmt.Appendf(nil, `{"select_only": {"key": "company_id", "value": %d}}`, company)})
	if err != nil {
		t.Fatalf("reserving: %v", err)
	}
	return len(got)
}

// waitReservable waits until a reserve hands out at least n chunks of company.
func waitReservable(t *testing.T, api *client.Client, company int64, n int) {
	t.Helper()
	got := 0
	clustertest.PollUntil(t, 10*time.Second, "the resumed chunks to be handed out", func() string {
		if got += reservable(t, api, company); got < n {
			return fmt.Sprintf("%d of %d chunks handed out", got, n)
		}
		return ""
	})
}

// noSideways checks that the page does not scroll sideways.
func (b *browser) noSideways(t *testing.T, what string) {
	t.Helper()
	if sw, iw := b.widths(t); sw > iw {
		t.Errorf("%s is %d px wide in a %d px window; want no sideways scroll", what, sw, iw)
	}
}

// widths returns the page's scroll width and the window's inner width.
func (b *browser) widths(t *testing.T) (scroll, window int64) {
	t.Helper()
	b.run(t, "measuring the page", chromedp.Evaluate(`document.documentElement.scrollWidth`, &scroll), chromedp.Evaluate(`window.innerWidth`, &window))
	return scroll, window
}

// TestUIChecksCanFail: the checks every page of the dashboard passes do fail on a page
// that scrolls sideways, a button out of the window, one covered by another element, one
// of no size, and a selector that matches nothing visible.
func TestUIChecksCanFail(t *testing.T) {
	b := newBrowser(t)
	b.run(t, "setting the width", chromedp.EmulateViewport(390, 900))
	page := `<!doctype html><meta name="viewport" content="width=device-width, initial-scale=1"><main>
<div style="width: 600px">wide</div>
<button id="ok">ok</button>
<button id="off" style="position: absolute; left: -300px">off</button>
<div style="position: relative"><button id="covered">covered</button><div style="position: absolute; inset: 0"></div></div>
<button id="flat" style="width: 0; height: 0; padding: 0; border: 0"></button>
<button id="gone" hidden>gone</button></main>`
	b.run(t, "opening the page", chromedp.Navigate("data:text/html,"+url.PathEscape(page)), chromedp.WaitReady("main", chromedp.ByQuery))
	if sw, iw := b.widths(t); sw <= iw {
		t.Errorf("a 600 px page measures %d px in a %d px window; want it found too wide", sw, iw)
	}
	for sel, want := range map[string]string{"#ok": "", "#off": "outside the window", "#covered": "covered by", "#flat": "no size", "#gone": "nothing matches"} {
		got := strings.Join(b.unreachable(t, sel), "; ")
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("unreachable(%s) = %q; want %q", sel, got, cmp.Or(want, "nothing"))
		}
	}
}

// press clicks the button sel, then Confirm on the page it leads to, and waits for wait.
func (b *browser) press(t *testing.T, sel, wait, shot string) {
	t.Helper()
	b.run(t, "pressing "+sel, chromedp.Click(sel, chromedp.ByQuery), chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	if shot != "" {
		b.screenshot(t, shot)
	}
	b.run(t, "confirming "+sel, chromedp.Click("#confirm", chromedp.ByQuery), chromedp.WaitVisible(wait, chromedp.ByQuery))
}

// lifecycleFlow: a failed submission's page shows its failed chunk and error, the policy
// and the buttons that apply; Retry makes it in progress again, Pause and Resume do what
// they say, the page shows it each time, and nothing scrolls sideways.
func lifecycleFlow(t *testing.T, b *browser, api *client.Client, base string, width, company int64) {
	t.Helper()
	ctx := t.Context()
	msg := "boom: the downstream answered 500 <b>not bold</b> " + strings.Repeat("and again ", 60) + "END"
	id := failedSubmission(t, api, 3, company, msg)
	w := strconv.FormatInt(width, 10)
	b.open(t, base+"/ui/submissions/"+id, "lifecycle-failed-"+w, true)
	b.noSideways(t, "a failed submission's page at "+w+" px")
	var rows []string
	b.run(t, "reading the failed chunks", chromedp.Evaluate(`[...document.querySelectorAll("#failures tr[data-chunk]")].map(r => r.dataset.chunk + " " + r.cells[1].textContent)`, &rows))
	if !slices.Equal(rows, []string{"0 failed"}) {
		t.Errorf("failed chunks shown: %q; want [\"0 failed\"]", rows)
	}
	if got := b.text(t, "#failures summary"); !strings.HasPrefix(got, "boom: the downstream answered 500 <b>not bold</b>") || !strings.HasSuffix(got, "…") || len(got) > 400 {
		t.Errorf("the failed chunk's row shows %q; want its error, cut", got)
	}
	var whole string
	b.run(t, "reading the whole error", chromedp.Evaluate(`document.querySelector("#failures details pre").textContent`, &whole))
	if whole != msg {
		t.Errorf("the failed chunk's details hold %d bytes of the error; want all %d", len(whole), len(msg))
	}
	b.run(t, "opening the details", chromedp.Click("#failures summary", chromedp.ByQuery))
	b.screenshot(t, "lifecycle-failed-details-"+w)
	b.noSideways(t, "the error's details at "+w+" px")
	if got := b.text(t, "#policy"); !strings.HasPrefix(got, "fail_submission") {
		t.Errorf("policy shown: %q; want fail_submission", got)
	}
	if got := b.text(t, ".counts"); got != "0 / 1 / 2 / 3" {
		t.Errorf("counts: %q; want 0 / 1 / 2 / 3 (done / failed / skipped / total)", got)
	}
	var shown []string
	b.run(t, "reading the buttons", chromedp.Evaluate(`[...document.querySelectorAll("[data-action]")].filter(a => !a.hidden).map(a => a.id)`, &shown))
	if !slices.Equal(shown, []string{"retry", "retry_unfinished"}) {
		t.Errorf("buttons of a failed submission: %v; want [retry retry_unfinished]", shown)
	}
	b.check(t, "failed submission at "+w+" px")

	b.press(t, "#retry", "#submission", "lifecycle-confirm-retry-"+w)
	if got := b.text(t, "#state"); got != "in_progress" {
		t.Errorf("after Retry, the page says %q; want in_progress", got)
	}
	if st, err := api.Status(ctx, id, 0); err != nil || st.State != wire.StateInProgress || st.ChunksFailed != 0 {
		t.Errorf("after Retry from the page, the API says %s with %d failed (%v); want in_progress with none", st.State, st.ChunksFailed, err)
	}
	b.waitRefreshed(t)
	b.screenshot(t, "lifecycle-retried-"+w)
	b.check(t, "retry at "+w+" px")

	b.press(t, "#pause", "#submission", "")
	b.poll(t, 10*time.Second, "the page to say paused", `document.getElementById("paused").hidden + " " + document.getElementById("resume").hidden`, func(v string) bool { return v == "false false" })
	if n := reservable(t, api, company); n != 0 {
		t.Errorf("after Pause from the page, a reserve got %d chunks of the submission; want none", n)
	}
	b.waitRefreshed(t)
	b.screenshot(t, "lifecycle-paused-"+w)
	b.noSideways(t, "a paused submission's page at "+w+" px")
	b.press(t, "#resume", "#submission", "")
	b.poll(t, 10*time.Second, "the page to say resumed", `document.getElementById("paused").hidden + " " + document.getElementById("pause").hidden`, func(v string) bool { return v == "true false" })
	if st, err := api.Status(ctx, id, 0); err != nil || st.State != wire.StateInProgress {
		t.Errorf("after Resume from the page, the API says %s (%v); want in_progress", st.State, err)
	}
	waitReservable(t, api, company, 1)
	b.check(t, "pause and resume at "+w+" px")
}

// bulkFlow: the list, filtered to one company's failed submissions, retries them all;
// filtered to the company, it pauses and resumes them all.
func bulkFlow(t *testing.T, b *browser, api *client.Client, base string, width, company int64) {
	t.Helper()
	ctx := t.Context()
	ids := []string{failedSubmission(t, api, 2, company, "bulk boom"), failedSubmission(t, api, 2, company, "bulk boom")}
	w := strconv.FormatInt(width, 10)
	filter := fmt.Sprintf("/ui/submissions?key=company_id&value=%d", company)
	b.open(t, base+filter+"&state=failed", "bulk-failed-"+w, true)
	b.noSideways(t, "the list at "+w+" px")
	b.press(t, "#bulk-retry", "#notice", "bulk-confirm-retry-"+w)
	if got := b.text(t, "#notice"); got != "Retried 2 of 2 submissions." {
		t.Errorf("after Retry failed on the list: %q; want Retried 2 of 2 submissions.", got)
	}
	b.open(t, base+filter, "bulk-retried-"+w, true)
	b.press(t, "#bulk-pause", "#notice", "")
	if got := b.text(t, "#notice"); got != "Paused 2 of 2 submissions." {
		t.Errorf("after Pause all on the list: %q; want Paused 2 of 2 submissions.", got)
	}
	var paused int
	b.run(t, "counting paused rows", chromedp.Evaluate(`[...document.querySelectorAll("#submissions .paused")].filter(p => !p.hidden).length`, &paused))
	if paused != 2 {
		t.Errorf("the list marks %d submissions paused; want 2", paused)
	}
	b.screenshot(t, "bulk-paused-"+w)
	for _, id := range ids {
		if st, err := api.Status(ctx, id, 0); err != nil || st.State != wire.StateInProgress {
			t.Errorf("after the list's Retry and Pause, the API says %s is %s (%v); want in_progress", id, st.State, err)
		}
	}
	if n := reservable(t, api, company); n != 0 {
		t.Errorf("after the list's Pause, a reserve got %d chunks of its submissions; want none", n)
	}
	b.press(t, "#bulk-resume", "#notice", "")
	if got := b.text(t, "#notice"); got != "Resumed 2 of 2 submissions." {
		t.Errorf("after Resume all on the list: %q; want Resumed 2 of 2 submissions.", got)
	}
	waitReservable(t, api, company, 2)
	b.check(t, "bulk actions at "+w+" px")
}
