package typescript

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserNames are the executables tried, in order, to run the browser check (as in
// cmd/opsq's dashboard test).
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"}

// findBrowser returns $OPSQ_TEST_BROWSER, else the first of browserNames on the PATH; it
// fails the test with what to install when there is none.
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
	t.Fatalf("no browser to check the TypeScript client in: none of %s is on the PATH. Install Debian's chromium (apt-get install -y chromium; .ci/run does) or set OPSQ_TEST_BROWSER", strings.Join(browserNames, ", "))
	return ""
}

// browserPage runs the built client (dist/) in a browser: it submits (JSON, and NDJSON
// built in memory as browsers do), runs a worker until there is no more work, reads the
// results and an error. The instances send no CORS headers, so the page and the API share
// an origin, as behind a proxy.
const browserPage = `<!doctype html><meta charset="utf-8"><title>opsq client</title>
<script type="module">
import { Client, OpsqError, work } from "/client/index.js";
try {
  const c = new Client({ baseURL: location.origin, key: KEY });
  const t = "browser-" + Date.now();
  const { id } = await c.submit({ chunks: ["a", "b", "c"], strategic_metadata: { test: t } });
  const progress = [];
  const nd = await c.submitNDJSON({ strategic_metadata: { test: t } }, (function* () { yield "x"; yield "y"; })(), { onProgress: (p) => progress.push(p.chunks) });
  const stats = await work(c, async (ch) => ch.input.toUpperCase(), { strategy: 'select_only(test="' + t + '")', once: true, wait: "1s", concurrency: 2, log: () => {} });
  const lines = [];
  for await (const r of c.results(id)) lines.push(r);
  let err = null;
  try { await c.status("123456789"); } catch (e) { err = { isOpsqError: e instanceof OpsqError, status: e.status, code: e.code }; }
  window.outcome = JSON.stringify({ lines, nd: nd.chunks_total, progress: progress.at(-1), stats, err });
} catch (e) {
  window.outcome = JSON.stringify({ failed: String(e && e.stack || e) });
}
</script>`

// checkInBrowser loads browserPage in headless Chromium, with the API of instance apiURL
// behind the page's own origin, and checks what the page did.
func checkInBrowser(t *testing.T, apiURL, key string) {
	target, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", httputil.NewSingleHostReverseProxy(target))
	mux.Handle("/client/", http.StripPrefix("/client/", http.FileServer(http.Dir("dist"))))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		k, _ := json.Marshal(key)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(strings.Replace(browserPage, "KEY", string(k), 1)))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(findBrowser(t)), chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(actx)
	defer cancelCtx()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var outcome string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Poll(`window.outcome`, &outcome, chromedp.WithPollingInterval(100*time.Millisecond)),
	); err != nil {
		t.Fatalf("running the client in the browser: %v", err)
	}
	var got struct {
		Failed   string            `json:"failed"`
		Lines    []json.RawMessage `json:"lines"`
		ND       int               `json:"nd"`
		Progress int               `json:"progress"`
		Stats    struct{ Done, Failed, Lost int }
		Err      struct {
			IsOpsqError bool   `json:"isOpsqError"`
			Status      int    `json:"status"`
			Code        string `json:"code"`
		} `json:"err"`
	}
	if err := json.Unmarshal([]byte(outcome), &got); err != nil {
		t.Fatalf("the page's outcome %q: %v", outcome, err)
	}
	if got.Failed != "" {
		t.Fatalf("the client failed in the browser: %s", got.Failed)
	}
	var lines []string
	for _, l := range got.Lines {
		lines = append(lines, string(l))
	}
	want := []string{`{"chunk_index":0,"output":"A"}`, `{"chunk_index":1,"output":"B"}`, `{"chunk_index":2,"output":"C"}`}
	if !slices.Equal(lines, want) {
		t.Errorf("results in the browser: got %v; want %v", lines, want)
	}
	if got.ND != 2 || got.Progress != 2 {
		t.Errorf("NDJSON submission in the browser: got %d chunks, last progress %d; want 2 and 2", got.ND, got.Progress)
	}
	if got.Stats.Done != 5 || got.Stats.Failed != 0 || got.Stats.Lost != 0 {
		t.Errorf("the worker in the browser: got %+v; want 5 done", got.Stats)
	}
	if !got.Err.IsOpsqError || got.Err.Status != 404 || got.Err.Code != "not_found" {
		t.Errorf("an unknown submission in the browser: got %+v; want an OpsqError 404 not_found", got.Err)
	}
}
