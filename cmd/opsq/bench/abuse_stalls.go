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
	"strconv"
	"strings"
	"sync"
	"time"

	"opsq/api/wire"
	"opsq/cmd/opsq/progress"
)

// The stalls of the abuse workload (DESIGN.md §3 and §8): --abuse-stalls NDJSON uploads
// that send their header and one chunk, then nothing, and as many readers of a completed
// submission's results that read a little, then nothing, all held for --abuse-duration. The
// report counts those the instances cut, and how: a 503 with Retry-After when the ingest
// or results slots are full is a refusal by design, not a fault.

// Sizes of the results the stalled readers read.
const (
	abuseResultsChunks = 2000     // the completed submission the stalled readers read
	abuseResultsOutput = 16 << 10 // bytes of each of its outputs: 32 MB of results, more than the socket buffers hold
)

// stalledUploadsCase is the case of the stalled uploads.
func (a *abuseRun) stalledUploadsCase() abuseCase {
	var uploads stallResults
	return abuseCase{
		held: true,
		run:  func(ctx context.Context) { uploads = a.stallUploads(ctx) },
		report: func() {
			a.r.report.add(measured("abuse.stalled_uploads_cut", fmt.Sprintf("stalled NDJSON uploads cut, of %d", uploads.n), float64(uploads.cut), unitCount).
				want(">=", float64(uploads.n)).note("%s; held %s", uploads.summary(), progress.Duration(a.r.cfg.AbuseDuration)))
		},
	}
}

// stalledReadersCase is the case of the stalled results readers, which read the results
// of a submission that prepareResults makes.
func (a *abuseRun) stalledReadersCase() abuseCase {
	var (
		resultsID    string
		resultsBytes int64
		readers      stallResults
	)
	return abuseCase{
		prepare: func(ctx context.Context) ([]string, error) {
			var err error
			resultsID, resultsBytes, err = a.prepareResults(ctx)
			if err != nil {
				return nil, err
			}
			return []string{resultsID}, nil
		},
		held: true,
		run:  func(ctx context.Context) { readers = a.stallReaders(ctx, resultsID, resultsBytes) },
		report: func() {
			a.r.report.add(measured("abuse.stalled_readers_cut", fmt.Sprintf("stalled results readers cut, of %d", readers.n), float64(readers.cut), unitCount).
				want(">=", float64(readers.n)).note("%s", readers.summary()))
		},
	}
}

// prepareResults makes a completed submission of abuseResultsChunks chunks, each with an
// output of abuseResultsOutput bytes, for the stalled readers, and returns its id and the
// size of its results stream.
func (a *abuseRun) prepareResults(ctx context.Context) (string, int64, error) {
	c := a.clients[0]
	chunks := make([]string, abuseResultsChunks)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	created, err := c.Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{StrategicMetadata: benchTagged("abuse-results")}, Chunks: chunks})
	if err != nil {
		return "", 0, fmt.Errorf("submitting the results submission: %w", err)
	}
	output := strings.Repeat("r", abuseResultsOutput)
	deadline := time.Now().Add(abuseRequestTimeout)
	for done := 0; done < abuseResultsChunks; {
		if time.Now().After(deadline) {
			return "", 0, fmt.Errorf("completing the results submission: %d of %d chunks after %s", done, abuseResultsChunks, abuseRequestTimeout)
		}
		got, err := a.clients[done%len(a.clients)].Reserve(ctx, wire.ReserveRequest{Max: 500, Strategy: strategyFor("abuse-results"), Lease: "10m", Wait: "1s"})
		if err != nil {
			return "", 0, fmt.Errorf("reserving the results submission: %w", err)
		}
		comps := make([]wire.Completion, len(got))
		for i, ch := range got {
			comps[i] = wire.Completion{Token: ch.Token, Output: output}
		}
		if len(comps) > 0 {
			if _, err := c.Complete(ctx, comps...); err != nil {
				return "", 0, fmt.Errorf("completing the results submission: %w", err)
			}
		}
		done += len(got)
	}
	if _, err := c.Status(ctx, created.ID, 30*time.Second); err != nil {
		return "", 0, err
	}
	var size int64
	err = c.Results(ctx, created.ID, func(res wire.Result) error {
		if res.Output != nil {
			size += int64(len(*res.Output))
		}
		size += 32
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("reading the results: %w", err)
	}
	return created.ID, size, nil
}

// stallResults says how stalled requests ended: cut by the server (with the status it
// sent, or "closed") or still open when the bench closed them.
type stallResults struct {
	n       int
	cut     int
	answers map[string]int
	slowest time.Duration // the longest a cut request was held
}

func (s *stallResults) summary() string {
	return summarizeStatuses(s.answers)
}

// stallUploads opens --abuse-stalls NDJSON uploads that send their header and one chunk,
// then nothing, until ctx ends.
func (a *abuseRun) stallUploads(ctx context.Context) stallResults {
	header, _ := json.Marshal(map[string]any{"strategic_metadata": map[string]any{abuseTag: "stalled_upload"}})
	first := append(append(header, '\n'), "\"chunk 0\"\n"...)
	auth := a.r.env.keys.header(http.MethodPost, "/v1/submissions")
	return a.stall(ctx, func(addr string) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, "POST /v1/submissions HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n", addr, auth)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", len(first), first)
		return b.Bytes()
	}, -1, "POST /v1/submissions (stalled upload)")
}

// stallReaders opens --abuse-stalls reads of the results of submission id (size bytes of
// NDJSON) that read a little, then nothing, until ctx ends.
func (a *abuseRun) stallReaders(ctx context.Context, id string, size int64) stallResults {
	path := "/v1/submissions/" + id + "/results"
	auth := a.r.env.keys.header(http.MethodGet, path)
	return a.stall(ctx, func(addr string) []byte {
		return fmt.Appendf(nil, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path, addr, auth)
	}, size, "GET /v1/submissions/{id}/results (stalled reader)")
}

// stall opens the stalled connections, each sending request(addr) and then nothing. With
// full < 0 (an upload) a connection is cut when the server answers or closes it; with full
// ≥ 0 (a reader, which reads 1 KiB and then stops) when the server closes it before
// sending full bytes. The connections are closed when ctx ends.
func (a *abuseRun) stall(ctx context.Context, request func(addr string) []byte, full int64, route string) stallResults {
	res := stallResults{n: a.r.cfg.AbuseStalls, answers: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range res.n {
		inst := a.r.env.instances[i%len(a.r.env.instances)]
		addr := strings.TrimPrefix(inst.url, "http://")
		wg.Go(func() {
			start := time.Now()
			outcome := a.stallOne(ctx, addr, request(addr), full)
			mu.Lock()
			defer mu.Unlock()
			res.answers[outcome]++
			if outcome != "held until the end" {
				res.cut++
				res.slowest = max(res.slowest, time.Since(start))
			}
			switch code, err := strconv.Atoi(outcome); {
			case err == nil && code == http.StatusServiceUnavailable:
				a.counter.add(route+" (Retry-After)", code) // a limit refused it, as designed
			case err == nil && code >= 500:
				a.counter.add(route, code)
			case strings.HasSuffix(outcome, " without Retry-After"):
				a.counter.add(route, http.StatusServiceUnavailable)
			}
		})
	}
	wg.Wait()
	return res
}

// stallOne runs one stalled request and says how it ended: the server's status code,
// "closed" (cut without an answer), "held until the end", or what failed.
func (a *abuseRun) stallOne(ctx context.Context, addr string, request []byte, full int64) string {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "cannot connect"
	}
	defer conn.Close()
	if _, err := conn.Write(request); err != nil {
		return "write failed"
	}
	ended := make(chan string, 1)
	go func() {
		br := bufio.NewReaderSize(conn, 1<<10)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			ended <- "closed"
			return
		}
		if full < 0 || resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			outcome := strconv.Itoa(resp.StatusCode)
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
				outcome += " without Retry-After"
			}
			ended <- outcome
			return
		}
		// A reader: read the headers, then nothing until ctx ends (the server's writes
		// block once the socket buffers are full); then read on for a moment: the end of
		// the stream before all of it came means the server cut it, data still coming
		// means it was held.
		<-ctx.Done()
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, err := io.Copy(io.Discard, resp.Body)
		var netErr net.Error
		switch {
		case errors.As(err, &netErr) && netErr.Timeout():
			ended <- "held until the end"
		case n < full/2:
			ended <- "cut"
		default:
			ended <- "held until the end" // the whole stream came: it was never cut
		}
	}()
	select {
	case outcome := <-ended:
		return outcome
	case <-ctx.Done():
		if full >= 0 {
			return <-ended
		}
		return "held until the end"
	}
}
