//go:build linux

package main

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// TestDashboardHeldAndChunks drives the dashboard in a real browser against a real
// instance that requires keys (issue 33, 5 and 8): the overview counts paused and
// scheduled submissions apart from the running ones, and neither the pending chunks nor
// the oldest running card counts them; the list filters them and marks them, its ids and
// ages on one line at 1 440 px, strategic metadata as chips; the failed-chunks table
// refreshes itself; a chunk's page shows its state, its input (escaped; binary as hex),
// its output, its attempts with their consumer, and the submission's Retry; a tap on a
// shard shows its details without starting the disable flow. Every page at 1 440 and
// 390 px: no sideways scroll, every button reachable.
func TestDashboardHeldAndChunks(t *testing.T) {
	b := newBrowser(t)
	dbURL := pgtest.NewDB(t)
	admin := createKey(t, dbURL, "held-admin", "admin")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.Env = append(c.Env, "OPSQ_AUTH=required")
	c.Key = admin
	inst := c.StartN(1)[0]
	ctx := t.Context()
	api, base := inst.Client, inst.URL
	submit := func(chunks []string, company int64, h wire.SubmissionHeader) string {
		t.Helper()
		if h.StrategicMetadata == nil {
			h.StrategicMetadata = map[string]wire.MetadataValue{}
		}
		h.StrategicMetadata["company_id"], h.StrategicMetadata["mode"] = wire.Int(company), wire.String("preview")
		created, err := api.Submit(ctx, wire.Submission{Chunks: chunks, SubmissionHeader: h})
		if err != nil {
			t.Fatalf("submitting: %v", err)
		}
		return created.ID
	}
	// The oldest two are held: the oldest running one is younger.
	paused := submit([]string{"p0", "p1"}, 1, wire.SubmissionHeader{})
	if _, err := api.Pause(ctx, paused); err != nil {
		t.Fatal(err)
	}
	// A long value of strategic metadata: the list's widest cell, which squeezed the ids
	// and ages into several lines each.
	scheduled := submit([]string{"s0", "s1", "s2", "s3"}, 2, wire.SubmissionHeader{NotBefore: "1h",
		StrategicMetadata: map[string]wire.MetadataValue{"batch": wire.String(strings.Repeat("nightly-reindex-eu-west ", 14))}})
	running := submit([]string{"r0", "r1", "r2"}, 3, wire.SubmissionHeader{})
	// A submission whose chunks fail and complete: chunk 0 fails for good, chunk 1 (binary)
	// fails once and is to be retried at once, chunk 2 completes with a long output.
	one := 1
	chunky := submit([]string{"plain <b>text</b> & more", "\x00\x01\x02binary\u00ff", "long"}, 4, wire.SubmissionHeader{
		MaxRetries: &one, OnFailure: wire.OnFailureContinue, RetryBackoff: &wire.RetryBackoff{Initial: "0s"}})
	reserved, err := api.Reserve(ctx, wire.ReserveRequest{Max: 3, Consumer: "render-7", Strategy: []byte(`{"select_only": {"key": "company_id", "value": 4}}`)})
	if err != nil || len(reserved) != 3 {
		t.Fatalf("reserving chunky's chunks: %v, %d chunks", err, len(reserved))
	}
	tokens := map[int64]string{}
	for _, ch := range reserved {
		tokens[ch.ChunkIndex] = ch.Token
	}
	no, yes := false, true
	if _, err := api.Fail(ctx, wire.ChunkFailure{Token: tokens[0], Error: "boom <i>not italic</i>", Retry: &no}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("0123456789", 1000) // 10 000 bytes: the page shows the first 4 096
	if _, err := api.Complete(ctx, wire.Completion{Token: tokens[2], Output: long}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Fail(ctx, wire.ChunkFailure{Token: tokens[1], Error: "try again", Retry: &yes}); err != nil {
		t.Fatal(err)
	}

	b.run(t, "opening the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible("#key", chromedp.ByQuery))
	b.run(t, "logging in", chromedp.SendKeys("#key", admin, chromedp.ByQuery),
		chromedp.Click("#login", chromedp.ByQuery), chromedp.WaitVisible("#running", chromedp.ByQuery))

	// The overview: each phase as the API lists it; pending chunks and the oldest of the
	// running ones only.
	b.open(t, base+"/ui/", "held-overview", true)
	count := func(state wire.State) (n int, left int64) {
		t.Helper()
		l, err := api.List(ctx, client.ListOptions{State: state})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range l.Submissions {
			left += s.ChunksTotal - s.ChunksDone
		}
		return len(l.Submissions), left
	}
	nRunning, leftRunning := count(wire.ListRunning)
	nPaused, leftPaused := count(wire.ListPaused)
	nScheduled, leftScheduled := count(wire.ListScheduled)
	if nRunning != 2 || nPaused != 1 || nScheduled != 1 {
		t.Fatalf("the API lists %d running, %d paused, %d scheduled; want 2, 1, 1", nRunning, nPaused, nScheduled)
	}
	for sel, want := range map[string]string{
		"#running": strconv.Itoa(nRunning), "#in-progress": "4",
		"#paused-count": strconv.Itoa(nPaused), "#paused-chunks": strconv.FormatInt(leftPaused, 10),
		"#scheduled-count": strconv.Itoa(nScheduled), "#scheduled-chunks": strconv.FormatInt(leftScheduled, 10),
		"#oldest-id": running,
	} {
		if got := b.text(t, sel); got != want {
			t.Errorf("overview: %s shows %q; want %q", sel, got, want)
		}
	}
	b.poll(t, 30*time.Second, "the pending chunks to be the running submissions' (nothing in flight)", `document.getElementById("chunks-waiting").textContent`,
		func(v string) bool { return v == strconv.FormatInt(leftRunning, 10) })
	if got := b.text(t, "#scheduled-next"); !strings.HasPrefix(got, "in 59m") && !strings.HasPrefix(got, "in 1h") {
		t.Errorf("overview: the next scheduled submission starts %q; want in about an hour", got)
	}
	b.check(t, "the overview's phases")

	// The list: by phase, each row marked; ids and ages on one line; metadata as chips.
	ids := func() []string {
		var out []string
		b.run(t, "reading ids", chromedp.Evaluate(`[...document.querySelectorAll("#submissions tr[data-id]")].map(r => r.dataset.id)`, &out))
		return out
	}
	visible := func(sel string) int {
		var n int
		b.run(t, "counting "+sel, chromedp.Evaluate(`[...document.querySelectorAll("`+sel+`")].filter(e => !e.hidden).length`, &n))
		return n
	}
	for _, tc := range []struct {
		state, want, mark string
	}{{"paused", paused, ".paused"}, {"scheduled", scheduled, ".scheduled"}} {
		b.open(t, base+"/ui/submissions?state="+tc.state, "held-list-"+tc.state, true)
		if got := ids(); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("the list of the %s: %v; want [%s]", tc.state, got, tc.want)
		}
		if n := visible("#submissions " + tc.mark); n != 1 {
			t.Errorf("the list of the %s marks %d rows %s; want 1", tc.state, n, tc.mark)
		}
	}
	b.open(t, base+"/ui/submissions?state=running", "held-list-running", true)
	if got := ids(); !slices.Equal(got, []string{chunky, running}) {
		t.Errorf("the list of the running: %v; want [%s %s]", got, chunky, running)
	}
	if n := visible("#submissions .paused") + visible("#submissions .scheduled"); n != 0 {
		t.Errorf("the list of the running marks %d rows paused or scheduled; want none", n)
	}
	b.open(t, base+"/ui/submissions", "held-list", true)
	var lines []string
	b.run(t, "counting the lines of ids and ages", chromedp.Evaluate(`[...document.querySelectorAll('#submissions td[data-l="id"] a, #submissions td[data-l="age"]')].map(e => {
  const r = document.createRange(); r.selectNodeContents(e);
  return e.textContent.trim() + ": " + [...r.getClientRects()].filter(x => x.width > 0).length;
})`, &lines))
	for _, l := range lines {
		if !strings.HasSuffix(l, ": 1") {
			t.Errorf("the list at 1 440 px: %q lines; want each id and age on one line", l)
		}
	}
	var chipTexts []string
	b.run(t, "reading the chips", chromedp.Evaluate(`[...document.querySelectorAll('#submissions tr[data-id="`+running+`"] .chip')].map(c => c.textContent)`, &chipTexts))
	if !slices.Equal(chipTexts, []string{"company_id = 3", "mode = preview"}) {
		t.Errorf("the running submission's metadata chips: %q; want [company_id = 3, mode = preview]", chipTexts)
	}
	b.check(t, "the list")

	// The failed chunks refresh themselves: chunk 1 fails for good while the page is open.
	b.open(t, base+"/ui/submissions/"+chunky, "chunky", true)
	rows := func() string {
		return `[...document.querySelectorAll("#failures tr[data-chunk]")].map(r => r.dataset.chunk + " " + r.cells[1].textContent).join(", ")`
	}
	b.poll(t, 10*time.Second, "the failed chunks", rows(), func(v string) bool { return v == "0 failed, 1 retrying" })
	b.run(t, "marking the page", chromedp.Evaluate(`window.notReloaded = true`, nil))
	var again []wire.ReservedChunk
	clustertest.PollUntil(t, 10*time.Second, "chunk 1 to be handed out again", func() string {
		if again, err = api.Reserve(ctx, wire.ReserveRequest{Max: 1, Consumer: "render-8", Strategy: []byte(`{"select_only": {"key": "company_id", "value": 4}}`)}); err != nil {
			return err.Error()
		}
		if len(again) != 1 {
			return "nothing handed out"
		}
		return ""
	})
	if _, err := api.Fail(ctx, wire.ChunkFailure{Token: again[0].Token, Error: "still broken", Retry: &no}); err != nil {
		t.Fatal(err)
	}
	b.poll(t, 15*time.Second, "the failed chunks to refresh", rows(), func(v string) bool { return v == "0 failed, 1 failed" })
	var kept bool
	b.run(t, "checking the page was not reloaded", chromedp.Evaluate(`window.notReloaded === true`, &kept))
	if !kept {
		t.Errorf("the failed chunks changed by a reload; want the page's script to redraw them")
	}
	b.check(t, "the failed chunks' refresh")

	// Chunk 0's page, from its row: failed, its input escaped, its attempt, Retry.
	b.run(t, "opening chunk 0", chromedp.Click(`#failures tr[data-chunk="0"] a`, chromedp.ByQuery), chromedp.WaitVisible("#chunk", chromedp.ByQuery))
	b.screenshot(t, "chunk-failed")
	if got := b.text(t, "#chunk-state"); got != "failed" {
		t.Errorf("chunk 0 is %q; want failed", got)
	}
	var input string
	var tags int
	b.run(t, "reading the input", chromedp.Evaluate(`document.querySelector("pre.blob.text").textContent`, &input),
		chromedp.Evaluate(`document.querySelectorAll("#chunk pre b, #chunk pre i").length`, &tags))
	if input != "plain <b>text</b> & more" || tags != 0 {
		t.Errorf("chunk 0's input shown as %q with %d elements in it; want the text itself, escaped", input, tags)
	}
	if got := b.text(t, "#attempts tbody"); !strings.Contains(got, "render-7") || !strings.Contains(got, "boom <i>not italic</i>") {
		t.Errorf("chunk 0's attempts: %q; want the error boom … by render-7", got)
	}
	if got := b.text(t, "#retry-note"); !strings.Contains(got, "Retry this chunk gives it alone a fresh attempt budget") {
		t.Errorf("chunk 0's retry note: %q; want it to tell the chunk's retry from the submission's", got)
	}
	b.doc(t, "dashboard-chunk")
	b.check(t, "chunk 0")

	// Chunk 1: binary, as hex and base64, with its size; two attempts, newest first.
	b.open(t, base+"/ui/submissions/"+chunky+"/chunks/1", "chunk-binary", false)
	if got := b.text(t, "pre.hex"); !strings.HasPrefix(got, "00000000  00 01 02 62 69 6e 61 72  79 c3 bf") {
		t.Errorf("chunk 1's input as hex: %q; want a dump of 00 01 02 binary ÿ", got)
	}
	if got := b.text(t, ".blob-size"); !strings.Contains(got, "11 bytes") || !strings.Contains(got, "binary") {
		t.Errorf("chunk 1's input size: %q; want 11 bytes, binary", got)
	}
	var attempts []string
	b.run(t, "reading the attempts", chromedp.Evaluate(`[...document.querySelectorAll("#attempts tbody tr")].map(r => r.cells[1].textContent + ": " + r.cells[2].textContent)`, &attempts))
	if !slices.Equal(attempts, []string{"render-8: still broken", "render-7: try again"}) {
		t.Errorf("chunk 1's attempts: %q; want render-8's then render-7's", attempts)
	}
	// Chunk 2: completed; its output cut at 4 KiB, its size whole.
	b.open(t, base+"/ui/submissions/"+chunky+"/chunks/2", "chunk-completed", false)
	var output string
	b.run(t, "reading the output", chromedp.Evaluate(`document.querySelector("pre.blob.text").textContent`, &output))
	if got := b.text(t, "#chunk-state"); got != "completed" || output != long[:4096] {
		t.Errorf("chunk 2: %q with %d bytes of output shown; want completed with the first 4 096", got, len(output))
	}
	if got := b.text(t, ".blob-size"); !strings.Contains(got, "10\u00a0000 bytes; the first 4\u00a0096 shown") {
		t.Errorf("chunk 2's output size: %q; want 10 000 bytes, the first 4 096 shown", got)
	}
	b.check(t, "chunks 1 and 2")

	// Every page at both widths.
	for _, w := range []int64{1440, 390} {
		b.run(t, "setting the width", chromedp.EmulateViewport(w, 900))
		ws := strconv.FormatInt(w, 10)
		for _, p := range []struct {
			path, name string
			live       bool
			actions    []string
		}{
			{"/ui/", "overview", true, []string{`.cards a[href="/ui/submissions?state=paused"]`}},
			{"/ui/submissions?state=paused", "list-paused", true, []string{"#bulk a.button", "#submissions a"}},
			{"/ui/submissions?state=scheduled", "list-scheduled", true, []string{"#submissions a"}},
			{"/ui/submissions", "list", true, []string{"#submissions a", ".chip"}},
			{"/ui/submissions/" + chunky, "chunky", true, []string{"#failures a", "#open-chunk", "#submission [data-action]"}},
			{"/ui/submissions/" + chunky + "/chunks/0", "chunk-0", false, []string{"#chunk-retry-one", "#chunk-retry", "#to-submission", "#next-chunk"}},
			{"/ui/submissions/" + chunky + "/chunks/1", "chunk-1", false, []string{"#chunk-retry-one", "#chunk-retry", "#prev-chunk", "details summary"}},
			{"/ui/submissions/" + chunky + "/chunks/2", "chunk-2", false, []string{"#prev-chunk"}},
			{"/ui/cluster?shard=5", "cluster-shard", true, []string{"#panel-action", ".shard"}},
		} {
			what := p.name + " at " + ws + " px"
			b.open(t, base+p.path, "held-"+p.name+"-"+ws, p.live)
			b.noSideways(t, what)
			b.reachable(t, "Log out on "+what, "#logout")
			for _, sel := range p.actions {
				b.reachable(t, sel+" on "+what, sel)
			}
			b.check(t, what)
		}

		// A tap on a shard shows its details, and does not start the disable flow; the
		// panel's button does.
		b.open(t, base+"/ui/cluster", "held-cluster-"+ws, true)
		b.run(t, "tapping shard 5", chromedp.Click("#shard-5", chromedp.ByQuery), chromedp.WaitVisible("#shard-panel", chromedp.ByQuery))
		var where string
		b.run(t, "reading the address", chromedp.Evaluate(`location.pathname + location.search`, &where))
		if where != "/ui/cluster?shard=5" || visible("#confirm") != 0 {
			t.Errorf("after a tap on shard 5 at %s px: at %s, a Confirm button %v; want the cluster page with its details, no confirmation", ws, where, visible("#confirm") != 0)
		}
		if got := b.text(t, "#panel-owner"); got != inst.ID {
			t.Errorf("shard 5's details at %s px: owner %q; want %s", ws, got, inst.ID)
		}
		b.waitRefreshed(t) // the panel stays, redrawn from the refresh
		b.reachable(t, "the panel's button at "+ws+" px", "#panel-action")
		b.screenshot(t, "held-shard-panel-"+ws)
		b.press(t, "#panel-action", "#shards", "held-shard-confirm-"+ws)
		if got := b.text(t, "#panel-state"); got != "disabled" {
			t.Errorf("after Disable from shard 5's details at %s px: %q; want disabled", ws, got)
		}
		cl, err := api.Cluster(ctx)
		if err != nil || !slices.Contains(cl.Disabled, 5) {
			t.Errorf("after Disable from the panel at %s px: /v1/cluster disabled %v (%v); want shard 5", ws, cl.Disabled, err)
		}
		b.press(t, "#panel-action", "#shards", "")
		b.check(t, "the shard panel at "+ws+" px")
	}
	b.run(t, "setting the width", chromedp.EmulateViewport(1440, 900))

	// Retry of chunk 0 alone from its page, after a confirmation: back on its page, it is
	// pending, and chunk 1 still failed; completed chunk 2's page offers no retry of it.
	b.open(t, base+"/ui/submissions/"+chunky+"/chunks/2", "chunk-completed-no-retry", false)
	if n := visible("#chunk-retry-one"); n != 0 {
		t.Errorf("completed chunk 2's page shows %d Retry this chunk buttons; want none", n)
	}
	b.open(t, base+"/ui/submissions/"+chunky+"/chunks/0", "chunk-retry-one", false)
	b.press(t, "#chunk-retry-one", "#chunk", "chunk-retry-one-confirm")
	if got := b.text(t, "#chunk-state"); got != "pending" {
		t.Errorf("chunk 0 after its retry: %q; want pending", got)
	}
	st, err := api.Status(ctx, chunky, 0)
	if err != nil || st.State != wire.StateInProgress || st.ChunksFailed != 1 {
		t.Errorf("after Retry this chunk on chunk 0: %s with %d failed (%v); want in_progress, chunk 1 still failed", st.State, st.ChunksFailed, err)
	}
	b.check(t, "retry of one chunk")

	// Retry from chunk 1's page: the submission's failed chunks, after a confirmation.
	b.open(t, base+"/ui/submissions/"+chunky+"/chunks/1", "chunk-retry", false)
	b.press(t, "#chunk-retry", "#submission", "chunk-retry-confirm")
	st, err = api.Status(ctx, chunky, 0)
	if err != nil || st.State != wire.StateInProgress || st.ChunksFailed != 0 {
		t.Errorf("after Retry from chunk 1's page: %s with %d failed (%v); want in_progress, none failed", st.State, st.ChunksFailed, err)
	}
	b.poll(t, 15*time.Second, "the failed chunks to say retrying", rows(), func(v string) bool { return v == "0 retrying, 1 retrying" })
	b.check(t, "retry from a chunk's page")
}
