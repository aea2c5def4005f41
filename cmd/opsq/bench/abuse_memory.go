package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

// The memory attacks of the abuse workload (DESIGN.md §3 "Memory is a budget, not a hope",
// §6's hostile line): the requests an audit took an instance past 512 MB with, all sent at
// once — keyless login forms of 10 MB, connections sending 1 MB of headers, JSON
// submissions and completes of 30 MiB, lists of submissions with 64 KiB of metadata each,
// a 30 MiB prefix — and uploads trickling a byte every 10 s, held for --abuse-duration.
// Each is answered as the design says (a bound's 4xx, or 503 with Retry-After when the
// budget is full); the workload's peak RSS rows say what they cost.

// Sizes of the memory attacks: the audit's, at the default --abuse-memory-bytes (30 MiB).
const (
	abuseLoginForms       = 60
	abuseHeaderConns      = 300
	abuseBigSubmissions   = 8
	abuseBigCompletes     = 10
	abuseLists            = 8
	abuseListMetadata     = 64 << 10
	abuseTrickles         = 8
	abuseTrickleEvery     = 10 * time.Second
	abuseMemoryConcurrent = 32 // the list submissions made at once when preparing
)

// memorySizes are the sizes that scale with --abuse-memory-bytes.
type memorySizes struct {
	body        int // each big body: 30 MiB
	loginForm   int // 10 MB
	headers     int // 1 MiB, at least 64 KiB: past the 32 KiB bound
	listedCount int // submissions of 64 KiB metadata listed: 1000
}

func (a *abuseRun) memorySizes() memorySizes {
	n := a.r.cfg.AbuseMemoryBytes
	return memorySizes{body: n, loginForm: n / 3, headers: max(n/30, 64<<10), listedCount: max(16, int(int64(n)*1000/(30<<20)))}
}

// The names of the memory attacks, as the report gives them ("big": --abuse-memory-bytes).
const (
	memLogin    = "POST /ui/login, big form, no key"
	memHeaders  = "GET /v1/submissions with huge headers"
	memSubmit   = "POST /v1/submissions, big JSON"
	memComplete = "POST /v1/complete, big, forged tokens"
	memList     = "GET /v1/submissions?limit=1000 of 64 KiB metadata"
	memPrefix   = "POST /v1/submissions, big prefix"
)

// memoryAttacksCase is the case of the memory attacks sent at once.
func (a *abuseRun) memoryAttacksCase() abuseCase {
	var largestPage atomic.Int64
	return abuseCase{
		prepare: a.prepareLists,
		run:     func(ctx context.Context) { a.memoryAttacks(ctx, &largestPage) },
		report: func() {
			for _, m := range []struct {
				name, label string
				designed    []string
			}{
				{memLogin, "413, or cut while sending", []string{"413", "cut while sending"}},
				{memHeaders, "431, or cut while sending", []string{"431", "cut while sending"}},
				{memSubmit, "201 or 503 busy", []string{"201", "503"}},
				{memComplete, "200 or 503 busy", []string{"200", "503"}},
				{memList, "200 or 503 busy", []string{"200", "503"}},
				{memPrefix, "400 or 503 busy", []string{"400", "503"}},
			} {
				a.reportAnswers(m.name, m.label, func(status string) bool { return slices.Contains(m.designed, status) })
			}
			a.r.report.add(measured("abuse.memory.largest_list_page_mb", "largest page of GET /v1/submissions of 64 KiB metadata",
				float64(largestPage.Load())/(1<<20), unitMB).want("<=", 4.1).note("cut at 4 MiB, next_after pointing on"))
		},
	}
}

// prepareLists makes abuseListSubmissions submissions of one chunk with abuseListMetadata
// bytes of metadata each, for the lists to read.
func (a *abuseRun) prepareLists(ctx context.Context) ([]string, error) {
	meta := strings.Repeat("m", abuseListMetadata)
	ids := make([]string, a.memorySizes().listedCount)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, abuseMemoryConcurrent)
	for w := range abuseMemoryConcurrent {
		wg.Go(func() {
			c := a.clients[w%len(a.clients)]
			for i := int(next.Add(1) - 1); i < len(ids) && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				created, err := c.Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
					Metadata: meta, StrategicMetadata: benchTagged("abuse-lists")}, Chunks: []string{"l"}})
				if err != nil {
					errs[w] = fmt.Errorf("submitting the submissions the lists read: %w", err)
					return
				}
				ids[i] = created.ID
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ids, nil
}

// memoryAttacks sends every memory attack at once, and waits for their answers.
func (a *abuseRun) memoryAttacks(ctx context.Context, largestPage *atomic.Int64) {
	size := a.memorySizes()
	bigChunk := strings.Repeat("c", 1<<10)
	chunks := make([]string, size.body/(len(bigChunk)+3))
	for i := range chunks {
		chunks[i] = bigChunk
	}
	// Within every bound: a 201 is a designed answer, so it is not tagged as hostile (the
	// report counts those created); it is discarded at once.
	bigSubmission := mustJSON(map[string]any{"chunks": chunks, "strategic_metadata": benchTagged("abuse-big-json")})
	bigComplete := mustJSON(map[string]any{"completions": []map[string]any{{"token": "forged", "output": strings.Repeat("o", size.body)}}})
	bigPrefix := mustJSON(map[string]any{"prefix": "s3://" + strings.Repeat("p", size.body), "chunk_count": 1, "strategic_metadata": abuseTagged("big_prefix")})
	loginForm := []byte("key=" + strings.Repeat("k", size.loginForm))

	var wg sync.WaitGroup
	inst := func(i int) string { return a.r.env.instances[i%len(a.r.env.instances)].url }
	for i := range abuseLoginForms {
		wg.Go(func() {
			a.memoryPost(ctx, memLogin, inst(i)+"/ui/login", "application/x-www-form-urlencoded", loginForm, false)
		})
	}
	for i := range abuseHeaderConns {
		wg.Go(func() {
			a.answered(memHeaders, a.hugeHeaders(ctx, strings.TrimPrefix(inst(i), "http://"), size.headers))
		})
	}
	for i := range abuseBigSubmissions {
		wg.Go(func() {
			a.memoryPost(ctx, memSubmit, inst(i)+"/v1/submissions", "application/json", bigSubmission, true)
		})
	}
	for i := range abuseBigCompletes {
		wg.Go(func() { a.memoryPost(ctx, memComplete, inst(i)+"/v1/complete", "application/json", bigComplete, true) })
	}
	for i := range abuseLists {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, inst(i)+"/v1/submissions?limit=1000", nil)
			resp, err := a.hc.Do(req)
			if err != nil {
				a.answered(memList, "error")
				return
			}
			defer resp.Body.Close()
			n, _ := io.Copy(io.Discard, resp.Body)
			if resp.StatusCode == http.StatusOK {
				storeMax(largestPage, n)
			}
			a.answered(memList, strconv.Itoa(resp.StatusCode))
		})
	}
	wg.Go(func() { a.memoryPost(ctx, memPrefix, inst(0)+"/v1/submissions", "application/json", bigPrefix, true) })
	wg.Wait()
}

// memoryPost sends one memory attack's POST and records its answer; a submission it
// created is discarded at once.
func (a *abuseRun) memoryPost(ctx context.Context, name, url, ctype string, body []byte, withKey bool) {
	rctx, cancel := context.WithTimeout(ctx, abuseRequestTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	hc := a.hcNoKey
	if withKey {
		hc = a.hc
	}
	resp, err := hc.Do(req)
	if err != nil {
		// An answer before the body was sent (a bound checked on the first bytes) closes
		// the connection under the rest of the body.
		if errors.Is(err, context.DeadlineExceeded) {
			a.answered(name, "timeout")
		} else {
			a.answered(name, "cut while sending")
		}
		return
	}
	defer resp.Body.Close()
	a.answered(name, strconv.Itoa(resp.StatusCode))
	var created wire.Created
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode == http.StatusCreated && json.Unmarshal(b, &created) == nil && created.ID != "" {
		if name != memSubmit { // the others are refused by design
			a.mu.Lock()
			a.mu.created[created.ID] = name
			a.mu.Unlock()
		}
		a.r.discard(ctx, created.ID)
	}
}

// hugeHeaders sends a request with n bytes of headers on a connection of its own and says
// how it was answered.
func (a *abuseRun) hugeHeaders(ctx context.Context, addr string, n int) string {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "cannot connect"
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(abuseRequestTimeout))
	var req bytes.Buffer
	fmt.Fprintf(&req, "GET /v1/submissions HTTP/1.1\r\nHost: %s\r\n%s", addr, a.r.env.keys.header(http.MethodGet, "/v1/submissions"))
	line := "X-Abuse: " + strings.Repeat("h", 1000) + "\r\n"
	for req.Len() < n {
		req.WriteString(line)
	}
	req.WriteString("\r\n")
	go func() { _, _ = io.Copy(conn, &req) }() // the answer may come before it is all sent
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "cut while sending"
	}
	resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

// tricklingUploadsCase is the case of the uploads that trickle a byte every 10 s, held
// for --abuse-duration: the rate floor cuts them (408), or the ingest slots, full, refuse
// them (503).
func (a *abuseRun) tricklingUploadsCase() abuseCase {
	res := stallResults{n: abuseTrickles, answers: map[string]int{}}
	return abuseCase{
		held: true,
		run: func(ctx context.Context) {
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i := range abuseTrickles {
				addr := strings.TrimPrefix(a.r.env.instances[i%len(a.r.env.instances)].url, "http://")
				wg.Go(func() {
					start := time.Now()
					outcome := a.trickle(ctx, addr)
					mu.Lock()
					defer mu.Unlock()
					res.answers[outcome]++
					if outcome != "held until the end" {
						res.cut++
						res.slowest = max(res.slowest, time.Since(start))
					}
				})
			}
			wg.Wait()
		},
		report: func() {
			a.r.report.add(measured("abuse.trickling_uploads_cut", fmt.Sprintf("uploads trickling a byte every %s cut, of %d", abuseTrickleEvery, res.n), float64(res.cut), unitCount).
				want(">=", float64(res.n)).note("%s; the slowest cut after %s; held %s", res.summary(), progress.Duration(res.slowest), progress.Duration(a.r.cfg.AbuseDuration)))
		},
	}
}

// trickle sends an NDJSON upload's header, then a byte every abuseTrickleEvery, until the
// server answers or ctx ends, and says how it ended.
func (a *abuseRun) trickle(ctx context.Context, addr string) string {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "cannot connect"
	}
	defer conn.Close()
	header := `{"strategic_metadata": {"` + abuseTag + `": "trickling_upload"}}` + "\n"
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /v1/submissions HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n", addr, a.r.env.keys.header(http.MethodPost, "/v1/submissions"))
	fmt.Fprintf(&b, "%x\r\n%s\r\n", len(header), header)
	if _, err := conn.Write(b.Bytes()); err != nil {
		return "write failed"
	}
	ended := make(chan string, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			ended <- "closed"
			return
		}
		resp.Body.Close()
		ended <- strconv.Itoa(resp.StatusCode)
	}()
	tick := time.NewTicker(abuseTrickleEvery)
	defer tick.Stop()
	for {
		select {
		case outcome := <-ended:
			return outcome
		case <-ctx.Done():
			return "held until the end"
		case <-tick.C:
			_, _ = conn.Write([]byte("1\r\n\"\r\n")) // one byte of the next chunk line
		}
	}
}
