package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/cmd/opsq/progress"
	"opsq/queuer/submissions"
	"opsq/queuer/tokens"
)

// The abuse workload (DESIGN.md §6, last line; issue 7): every hostile input of §3 and §8
// against the instances while a burn-down goes on — producers submitting, consumers
// completing, a ledger of every delivery. It measures what the hostile clients cost: the
// peak RSS of each instance, the oldest renewal of a claim and the oldest heartbeat, the
// 5xx answers by route, the chunks of the burn-down completed other than once, and how each
// hostile request was answered. It reports; only the burn-down's integrity (a chunk lost,
// completed twice or by a forged token) counts as broken.

// Targets and sizes of the abuse workload.
const (
	abuseRSSTargetMB    = 1000 // DESIGN.md §6: every instance under 1 GB
	abuseTag            = "opsq_abuse"
	abuseBenchKey       = "opsq_bench"
	abuseBurnChunks     = 200                    // chunks of each burn-down submission
	abuseSubmitEvery    = 250 * time.Millisecond // a burn-down submission this often
	abuseConsumers      = 16
	abuseResultsChunks  = 2000     // the completed submission the stalled readers read
	abuseResultsOutput  = 16 << 10 // bytes of each of its outputs: 32 MB of results, more than the socket buffers hold
	abuseBigMetadata    = 60 << 10
	abuseBigInput       = 1 << 10
	abuseDrainTimeout   = 90 * time.Second // for the burn-down to finish after the attacks
	abuseRequestTimeout = 120 * time.Second
	abuseSampleEvery    = 250 * time.Millisecond
	abuseForgedBatch    = 100
)

// abuse runs the abuse workload.
func (r *benchRun) abuse(ctx context.Context) error {
	a, err := newAbuse(ctx, r)
	if err != nil {
		return err
	}
	return a.run(ctx)
}

// abuseRun is the state of one abuse workload. Its counters are safe for concurrent use.
type abuseRun struct {
	r       *benchRun
	db      *pgxpool.Pool
	counter *statusCounter
	clients []*client.Client // through counter
	hc      *http.Client     // through counter, each request with its route's key (keys.go)
	hcNoKey *http.Client     // through counter, without keys
	soft    time.Duration    // claim_soft_expiry
	shards  int

	ledger *abuseLedger

	mu struct {
		sync.Mutex
		answers map[string]map[string]int // hostile request -> status -> count
		created map[string]string         // id -> hostile request, of hostile submissions created
		notes   map[string]string         // hostile request -> extra note
	}
	// Samples.
	peakRSS      []atomic.Int64 // kB, per instance, polled VmRSS
	oldestRenew  atomic.Int64   // ns
	oldestBeat   atomic.Int64   // ns
	readyzFailed atomic.Int64
	readyzFirst  atomic.Value // string: the first failure
}

func newAbuse(ctx context.Context, r *benchRun) (*abuseRun, error) {
	db := r.env.pool
	a := &abuseRun{r: r, db: db, counter: newStatusCounter(), ledger: newAbuseLedger(), shards: r.env.shardCount,
		peakRSS: make([]atomic.Int64, len(r.env.instances))}
	a.mu.answers, a.mu.created, a.mu.notes = map[string]map[string]int{}, map[string]string{}, map[string]string{}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = abuseConsumers + 16
	a.hc = &http.Client{Transport: a.counter.wrap(r.env.keys.transport(transport))}
	a.hcNoKey = &http.Client{Transport: a.counter.wrap(transport)}
	for _, inst := range r.env.instances {
		a.clients = append(a.clients, client.New(inst.url, client.WithHTTPClient(a.hc), client.WithUserAgent("opsq-bench-abuse")))
	}
	var soft string
	if err := db.QueryRow(ctx, `SELECT value FROM opsq.settings WHERE key = 'claim_soft_expiry'`).Scan(&soft); err != nil {
		return nil, fmt.Errorf("reading claim_soft_expiry: %w", err)
	}
	var err error
	if a.soft, err = time.ParseDuration(soft); err != nil {
		return nil, fmt.Errorf("claim_soft_expiry %q: %w", soft, err)
	}
	return a, nil
}

// answered records the answer to a hostile request: its status code, or what went wrong.
func (a *abuseRun) answered(name string, status string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.answers[name] == nil {
		a.mu.answers[name] = map[string]int{}
	}
	a.mu.answers[name][status]++
}

func (a *abuseRun) note(name, format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.notes[name] = fmt.Sprintf(format, args...)
}

// run prepares the backlogs, starts the samplers and the burn-down, runs the attacks for
// --abuse-duration, lets the burn-down finish, and reports.
func (a *abuseRun) run(ctx context.Context) error {
	cfg := a.r.cfg
	a.r.line.Show("abuse: preparing the results stream, the target chunks and the big backlog")
	resultsID, resultsBytes, err := a.prepareResults(ctx)
	if err != nil {
		return err
	}
	targetID, targets, err := a.prepareTargets(ctx)
	if err != nil {
		return err
	}
	bigIDs, err := a.prepareBig(ctx)
	if err != nil {
		return err
	}
	defer func() { // their reservations would hold up the instances' shutdown
		for _, id := range append(bigIDs, resultsID, targetID) {
			a.r.discard(ctx, id)
		}
	}()

	sctx, stopSamplers := context.WithCancel(ctx)
	var samplers sync.WaitGroup
	samplers.Go(func() { a.sampleRSS(sctx) })
	samplers.Go(func() { a.sampleClaims(sctx) })
	samplers.Go(func() { a.sampleReady(sctx) })
	defer func() { stopSamplers(); samplers.Wait() }()

	// The burn-down.
	bctx, stopBurn := context.WithCancel(ctx)
	defer stopBurn()
	pctx, stopProducers := context.WithCancel(bctx)
	defer stopProducers()
	var burn sync.WaitGroup
	burn.Go(func() { a.produce(pctx) })
	for i := range abuseConsumers {
		burn.Go(func() { a.consume(bctx, a.clients[i%len(a.clients)], fmt.Sprintf("abuse-consumer-%d", i)) })
	}

	// The attacks, for --abuse-duration.
	start := time.Now()
	stop := a.r.showProgress(func() string {
		return fmt.Sprintf("abuse: attacking for %s (stalls held %s); burn-down: %s chunks completed", progress.Duration(time.Since(start)),
			progress.Duration(cfg.AbuseDuration), progress.GroupDigits(a.ledger.completedCount()))
	})
	// The stalls last the duration; every other attack is sent whole, however long it takes.
	actx, stopAttacks := context.WithTimeout(ctx, cfg.AbuseDuration)
	defer stopAttacks()
	var attacks sync.WaitGroup
	var uploads, readers stallResults
	attacks.Go(func() { uploads = a.stallUploads(actx) })
	attacks.Go(func() { readers = a.stallReaders(actx, resultsID, resultsBytes) })
	attacks.Go(func() { a.hostileInputs(ctx, targets) })
	attacks.Go(func() { a.forgeTokens(ctx) })
	attacks.Go(func() { a.inventMethods(ctx) })
	attacks.Wait()
	stop()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Let the burn-down finish.
	stopProducers()
	stop = a.r.showProgress(func() string {
		return fmt.Sprintf("abuse: attacks over; waiting for the burn-down to finish: %s chunks completed", progress.GroupDigits(a.ledger.completedCount()))
	})
	finished := a.waitBurndown(ctx)
	stop()
	stopBurn()
	burn.Wait()
	stopSamplers()
	samplers.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	a.report(ctx, uploads, readers, finished)
	return nil
}

// strategyFor is select_only(opsq_bench = value, then random): each part of the workload
// reserves only its own chunks.
func strategyFor(value string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"select_only": map[string]any{"key": abuseBenchKey, "value": value, "then": "random"}})
	return b
}

func benchTagged(value string) map[string]wire.MetadataValue {
	return map[string]wire.MetadataValue{abuseBenchKey: wire.String(value)}
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
		size += int64(len(res.Output)) + 32
		return nil
	})
	if err != nil {
		return "", 0, fmt.Errorf("reading the results: %w", err)
	}
	return created.ID, size, nil
}

// prepareTargets reserves a few chunks of a submission of their own, whose tokens the
// hostile fails use.
func (a *abuseRun) prepareTargets(ctx context.Context) (string, []string, error) {
	retries := 1000
	chunks := make([]string, 16)
	for i := range chunks {
		chunks[i] = "target " + strconv.Itoa(i)
	}
	created, err := a.clients[0].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
		StrategicMetadata: benchTagged("abuse-target"), MaxRetries: &retries}, Chunks: chunks})
	if err != nil {
		return "", nil, fmt.Errorf("submitting the target submission: %w", err)
	}
	got, err := a.clients[0].Reserve(ctx, wire.ReserveRequest{Max: 16, Strategy: strategyFor("abuse-target"), Lease: "1h", Wait: "5s"})
	if err != nil {
		return created.ID, nil, fmt.Errorf("reserving the target chunks: %w", err)
	}
	var tokens []string
	for _, ch := range got {
		tokens = append(tokens, ch.Token)
	}
	if len(tokens) == 0 {
		return created.ID, nil, errors.New("reserving the target chunks: none")
	}
	return created.ID, tokens, nil
}

// prepareBig submits --abuse-big-chunks chunks of abuseBigInput bytes under
// abuseBigMetadata bytes of metadata (both within the bounds), for the reserve of max
// 10 000 over them.
func (a *abuseRun) prepareBig(ctx context.Context) ([]string, error) {
	n := a.r.cfg.AbuseBigChunks
	metadata := strings.Repeat("m", abuseBigMetadata)
	input := strings.Repeat("i", abuseBigInput)
	var ids []string
	for left := n; left > 0; {
		k := min(left, 1000)
		chunks := make([]string, k)
		for i := range chunks {
			chunks[i] = input
		}
		created, err := a.clients[0].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
			Metadata: metadata, StrategicMetadata: benchTagged("abuse-big")}, Chunks: chunks})
		if err != nil {
			return ids, fmt.Errorf("submitting the big backlog: %w", err)
		}
		ids = append(ids, created.ID)
		left -= k
	}
	return ids, nil
}

// produce submits a burn-down submission every abuseSubmitEvery until ctx ends.
func (a *abuseRun) produce(ctx context.Context) {
	t := time.NewTicker(abuseSubmitEvery)
	defer t.Stop()
	chunks := make([]string, abuseBurnChunks)
	for i := range chunks {
		chunks[i] = strconv.Itoa(i)
	}
	for i := 0; ; i++ {
		created, err := a.clients[i%len(a.clients)].Submit(ctx, wire.Submission{SubmissionHeader: wire.SubmissionHeader{
			StrategicMetadata: benchTagged("abuse-burndown")}, Chunks: chunks})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			id, _ := strconv.ParseInt(created.ID, 10, 64)
			a.ledger.addSubmission(id, created.ChunksTotal)
		} else {
			a.ledger.errors.Add(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// consume reserves and completes burn-down chunks until ctx ends; each completion's output
// is the chunk's token, so that the ledger can tell a completion of ours from a forger's.
func (a *abuseRun) consume(ctx context.Context, c *client.Client, name string) {
	req := wire.ReserveRequest{Max: 10, Strategy: strategyFor("abuse-burndown"), Lease: "5m", Wait: "1s", Consumer: name}
	for ctx.Err() == nil {
		chunks, err := c.Reserve(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				a.ledger.errors.Add(1)
				_ = clustertest.SleepCtx(ctx, 100*time.Millisecond)
			}
			continue
		}
		if len(chunks) == 0 {
			continue
		}
		comps := make([]wire.Completion, len(chunks))
		for i, ch := range chunks {
			a.ledger.deliver(ch)
			comps[i] = wire.Completion{Token: ch.Token, Output: ch.Token}
		}
		// A completion is retried until answered (repeating one is harmless), even once
		// ctx has ended, so that no chunk of ours is left half done.
		for attempt := 0; attempt < 20; attempt++ {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			results, err := c.Complete(cctx, comps...)
			cancel()
			if err == nil {
				for i, res := range results {
					a.ledger.answered(chunks[i], res.Status)
				}
				break
			}
			a.ledger.errors.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// waitBurndown waits until every burn-down submission has finished, for up to
// abuseDrainTimeout, and reports whether they all did.
func (a *abuseRun) waitBurndown(ctx context.Context) bool {
	deadline := time.Now().Add(abuseDrainTimeout)
	for time.Now().Before(deadline) {
		ids := a.ledger.submissionIDs()
		var finished int
		err := a.db.QueryRow(ctx, `SELECT count(*) FROM opsq.submission_status WHERE id = ANY($1) AND state <> 'in_progress'`, ids).Scan(&finished)
		if err == nil && finished == len(ids) {
			return true
		}
		if clustertest.SleepCtx(ctx, 500*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// sampleRSS polls the resident memory of each instance.
func (a *abuseRun) sampleRSS(ctx context.Context) {
	for ctx.Err() == nil {
		for i, inst := range a.r.env.instances {
			if kb, err := procStatusKB(inst.cmd.Process.Pid, "VmRSS"); err == nil && kb > a.peakRSS[i].Load() {
				a.peakRSS[i].Store(kb)
			}
		}
		_ = clustertest.SleepCtx(ctx, abuseSampleEvery)
	}
}

// sampleClaims polls the oldest renewal of a held shard and the oldest heartbeat of an
// instance, by the database's clock.
func (a *abuseRun) sampleClaims(ctx context.Context) {
	for ctx.Err() == nil {
		var renew, beat time.Duration
		err := a.db.QueryRow(ctx, `SELECT coalesce((SELECT max(now() - renewed_at) FROM opsq.shard_claims WHERE claimant IS NOT NULL), '0'),
			coalesce((SELECT max(now() - heartbeat_at) FROM opsq.instances), '0')`).Scan(&renew, &beat)
		if err == nil {
			storeMax(&a.oldestRenew, int64(renew))
			storeMax(&a.oldestBeat, int64(beat))
		}
		_ = clustertest.SleepCtx(ctx, abuseSampleEvery)
	}
}

// sampleReady polls GET /readyz of each instance.
func (a *abuseRun) sampleReady(ctx context.Context) {
	hc := &http.Client{Timeout: 5 * time.Second}
	for ctx.Err() == nil {
		for _, inst := range a.r.env.instances {
			resp, err := hc.Get(inst.url + "/readyz")
			what := ""
			if err != nil {
				what = err.Error()
			} else {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					what = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
				}
			}
			if what != "" && ctx.Err() == nil {
				if a.readyzFailed.Add(1) == 1 {
					a.readyzFirst.Store(fmt.Sprintf("%s at %s: %s", inst.id, time.Now().Format("15:04:05"), what))
				}
			}
		}
		_ = clustertest.SleepCtx(ctx, 500*time.Millisecond)
	}
}

func storeMax(v *atomic.Int64, n int64) {
	for old := v.Load(); n > old && !v.CompareAndSwap(old, n); old = v.Load() {
	}
}

// hostileRequest is one request that breaks a bound of DESIGN.md §3 or §8, and the status
// the design gives it.
type hostileRequest struct {
	name    string
	want    int
	method  string
	path    string
	ctype   string
	body    []byte
	timeout time.Duration
	// The API key it carries: its route's (keys.go), unless noKey (none), forgedKey (one
	// no instance knows) or asRole (that role's) says otherwise.
	noKey, forgedKey bool
	asRole           apikeys.Role
	header           map[string]string // more headers
	// answer, if set, reads the answer's body (else it is discarded); it returns a note.
	answer func(body io.Reader) string
}

// hostileRequests lists the hostile inputs: every bound pushed past its limit, and with
// keys (OPSQ_AUTH=required) requests without a valid key, with a key of the wrong role,
// and marked forwarded without a signature. tokens are live reservations the fails may use.
func hostileRequests(tokens []string, bigMax, keyCount int, chunkCountTimeout time.Duration, withKeys bool) []hostileRequest {
	js := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // the values below always marshal
		}
		return b
	}
	tagged := func(name string) map[string]any { return map[string]any{abuseTag: name} }
	keys := tagged("many_keys")
	for i := range keyCount {
		keys[fmt.Sprintf("k%06d", i)] = i
	}
	// Past PostgreSQL's btree row limit (about 2.7 KB) even compressed: random letters.
	longKey := tagged("long_key")
	longKey[randomLetters(2800)] = 1
	longValue := tagged("long_value")
	longValue["v"] = randomLetters(2800)
	bigMetadata := strings.Repeat("m", 1<<20+1)
	yes := true
	tok := func(i int) string { return tokens[i%len(tokens)] }
	ndjson := func(header any, lines ...string) []byte {
		b := append(js(header), '\n')
		for _, l := range lines {
			b = append(b, l...)
			b = append(b, '\n')
		}
		return b
	}
	post := func(name, path string, want int, body []byte) hostileRequest {
		return hostileRequest{name: name, want: want, method: http.MethodPost, path: path, ctype: "application/json", body: body}
	}
	reqs := []hostileRequest{
		post("metadata of 1 MiB + 1", "/v1/submissions", 400, js(map[string]any{"chunks": []string{"x"}, "metadata": bigMetadata, "strategic_metadata": tagged("metadata")})),
		{name: "metadata of 1 MiB + 1, NDJSON", want: 400, method: http.MethodPost, path: "/v1/submissions", ctype: "application/x-ndjson",
			body: ndjson(map[string]any{"metadata": bigMetadata, "strategic_metadata": tagged("metadata_ndjson")}, `"x"`)},
		post(progress.GroupDigits(int64(keyCount))+" strategic keys", "/v1/submissions", 400, js(map[string]any{"chunks": []string{"x"}, "strategic_metadata": keys})),
		post("strategic key of 2 800 bytes", "/v1/submissions", 400, js(map[string]any{"chunks": []string{"x"}, "strategic_metadata": longKey})),
		post("strategic value of 2 800 bytes", "/v1/submissions", 400, js(map[string]any{"chunks": []string{"x"}, "strategic_metadata": longValue})),
		post("NUL in metadata", "/v1/submissions", 400, js(map[string]any{"chunks": []string{"x"}, "metadata": "a\x00b", "strategic_metadata": tagged("nul_metadata")})),
		post("NUL in a strategic value", "/v1/submissions", 400, js(map[string]any{"chunks": []string{"x"}, "strategic_metadata": map[string]any{abuseTag: "nul_value", "v": "a\x00b"}})),
		{name: "chunk_count 100 000 001", want: 400, method: http.MethodPost, path: "/v1/submissions", ctype: "application/json", timeout: chunkCountTimeout,
			body: js(map[string]any{"prefix": "s3://opsq-abuse/", "chunk_count": 100_000_001, "strategic_metadata": tagged("chunk_count")})},
		post("invalid UTF-8 in a chunk", "/v1/submissions", 400, []byte(`{"chunks": ["a\xffb"], "strategic_metadata": {"`+abuseTag+`": "utf8"}}`)),
		{name: "invalid UTF-8 in a chunk, NDJSON", want: 400, method: http.MethodPost, path: "/v1/submissions", ctype: "application/x-ndjson",
			body: ndjson(map[string]any{"strategic_metadata": tagged("utf8_ndjson")}, `"ok"`, "\"a\xffb\"")},
		post("consumer of 1 KiB", "/v1/reserve", 400, js(map[string]any{"max": 1, "consumer": strings.Repeat("c", 1<<10), "strategy": strategyFor("abuse-none")})),
		post("reserve max 10 001", "/v1/reserve", 400, js(map[string]any{"max": 10_001, "strategy": strategyFor("abuse-none")})),
		post("fail error with NUL", "/v1/fail", 400, js(map[string]any{"failures": []any{map[string]any{"token": tok(0), "error": "a\x00b", "retry": yes}}})),
		post("fail error of 100 KiB (kept cut)", "/v1/fail", 200, js(map[string]any{"failures": []any{map[string]any{"token": tok(1), "error": strings.Repeat("e", 100<<10), "retry": yes}}})),
		post("fail error with invalid UTF-8", "/v1/fail", 400, []byte(`{"failures": [{"token": "`+tok(2)+`", "error": "a\xffb", "retry": true}]}`)),
	}
	if withKeys {
		submit := js(map[string]any{"chunks": []string{"x"}, "strategic_metadata": tagged("auth")})
		reserve := js(map[string]any{"max": 1, "strategy": strategyFor("abuse-none")})
		noKey, forged, wrongRole, unsigned := post("no API key", "/v1/submissions", 401, submit), post("unknown API key", "/v1/reserve", 401, reserve),
			post("consumer key submitting", "/v1/submissions", 403, submit), post("reserve marked forwarded, unsigned", "/v1/reserve", 401, reserve)
		noKey.noKey, forged.forgedKey, wrongRole.asRole = true, true, apikeys.Consumer
		unsigned.header = map[string]string{wire.ForwardedHeader: "opsq-abuse"}
		reqs = append(reqs, noKey, forged, wrongRole, unsigned)
	}
	big := post(fmt.Sprintf("reserve max %d over big chunks", bigMax), "/v1/reserve", 200,
		js(map[string]any{"max": bigMax, "strategy": strategyFor("abuse-big"), "lease": "1m"}))
	big.answer = func(body io.Reader) string {
		var n int64
		var chunks int
		buf := make([]byte, 64<<10)
		for {
			k, err := body.Read(buf)
			n += int64(k)
			chunks += bytes.Count(buf[:k], []byte(`"token"`))
			if err != nil {
				break
			}
		}
		return fmt.Sprintf("%s answer, %d chunks", progress.Bytes(n), chunks)
	}
	return append(reqs, big, big)
}

// hostileRequests is hostileRequests with the sizes of the configuration: a request of
// chunk_count 100 000 001 is given at most 10 s, and less in a run shorter than that.
func (a *abuseRun) hostileRequests(tokens []string) []hostileRequest {
	cfg := a.r.cfg
	return hostileRequests(tokens, min(10_000, cfg.AbuseBigChunks), cfg.AbuseKeys, min(10*time.Second, cfg.AbuseDuration), len(a.r.env.keys) > 0)
}

// randomLetters returns n random letters, which compress poorly.
func randomLetters(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(mrand.IntN(26))
	}
	return string(b)
}

// hostileInputs sends each hostile request once (the big reserve once per instance,
// alternating), recording each answer, and cancels any submission one of them created.
func (a *abuseRun) hostileInputs(ctx context.Context, tokens []string) {
	reqs := a.hostileRequests(tokens)
	for i, hr := range reqs {
		if ctx.Err() != nil {
			return
		}
		inst := a.r.env.instances[i%len(a.r.env.instances)]
		timeout := cmp.Or(hr.timeout, abuseRequestTimeout)
		rctx, cancel := context.WithTimeout(ctx, timeout)
		req, _ := http.NewRequestWithContext(rctx, hr.method, inst.url+hr.path, bytes.NewReader(hr.body))
		req.Header.Set("Content-Type", hr.ctype)
		for k, v := range hr.header {
			req.Header.Set(k, v)
		}
		hc := a.hc // adds the route's key
		switch {
		case hr.noKey:
			hc = a.hcNoKey
		case hr.forgedKey:
			req.Header.Set("Authorization", "Bearer "+apikeys.Generate())
		case hr.asRole != "":
			req.Header.Set("Authorization", "Bearer "+a.r.env.keys[hr.asRole])
		}
		started := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			what := "error"
			if errors.Is(err, context.DeadlineExceeded) {
				what = "timeout " + timeout.String()
			}
			a.answered(hr.name, what)
			a.note(hr.name, "%s", err)
			continue
		}
		a.answered(hr.name, strconv.Itoa(resp.StatusCode))
		if hr.answer != nil {
			a.note(hr.name, "%s in %s", hr.answer(resp.Body), progress.Duration(time.Since(started)))
		} else {
			a.note(hr.name, "answered in %s", progress.Duration(time.Since(started)))
			var created wire.Created
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			if resp.StatusCode/100 == 2 && json.Unmarshal(body, &created) == nil && created.ID != "" {
				a.mu.Lock()
				a.mu.created[created.ID] = hr.name
				a.mu.Unlock()
				a.r.discard(ctx, created.ID) // keep the cluster clean for the rest of the run
			}
		}
		resp.Body.Close()
		cancel()
	}
}

// forgeTokens sends --abuse-forged forged tokens, half to complete and half to fail with
// retry false, in batches: half are real burn-down tokens with one character changed, half
// are built by hand (today's token layout) for burn-down chunks.
func (a *abuseRun) forgeTokens(ctx context.Context) {
	const name = "forged tokens"
	cl, err := a.clients[0].Cluster(ctx)
	generation := map[int]int64{}
	if err == nil {
		for _, in := range cl.Instances {
			for _, s := range in.Shards {
				generation[s.Shard] = s.Generation
			}
		}
	}
	no := false
	sent := 0
	for i := 0; sent < a.r.cfg.AbuseForged && ctx.Err() == nil; i++ {
		batch := make([]string, 0, abuseForgedBatch)
		for len(batch) < min(abuseForgedBatch, a.r.cfg.AbuseForged-sent) {
			if len(batch)%2 == 0 {
				if t := a.ledger.recentToken(); t != "" {
					batch = append(batch, changeOneChar(t))
					continue
				}
			}
			batch = append(batch, a.handBuiltToken(generation))
		}
		c := a.clients[i%len(a.clients)]
		var results []wire.TokenResult
		if i%2 == 0 {
			comps := make([]wire.Completion, len(batch))
			for j, t := range batch {
				comps[j] = wire.Completion{Token: t, Output: "forged"}
			}
			results, err = c.Complete(ctx, comps...)
		} else {
			fails := make([]wire.ChunkFailure, len(batch))
			for j, t := range batch {
				fails[j] = wire.ChunkFailure{Token: t, Error: "forged", Retry: &no}
			}
			results, err = c.Fail(ctx, fails...)
		}
		sent += len(batch)
		if err != nil {
			a.answered(name, "error")
			continue
		}
		for _, res := range results {
			a.answered(name, string(res.Status))
		}
		_ = clustertest.SleepCtx(ctx, 20*time.Millisecond)
	}
}

// changeOneChar changes one character of a base64url token to another.
func changeOneChar(t string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := []byte(t)
	i := mrand.IntN(len(b))
	for {
		c := alphabet[mrand.IntN(len(alphabet))]
		if c != b[i] {
			b[i] = c
			return string(b)
		}
	}
}

// handBuiltToken builds a token for a burn-down chunk in today's layout (version 2:
// submission id, chunk index, shard, generation, retries, a random nonce, the id of the
// first cluster key, then a MAC), as an attacker who read the source but does not have the
// cluster secret would: the MAC is random.
func (a *abuseRun) handBuiltToken(generation map[int]int64) string {
	id, total := a.ledger.randomSubmission()
	if total == 0 {
		id, total = 1, 1
	}
	idx := mrand.IntN(int(total))
	shard := submissions.ShardOf(id, idx, max(a.shards, 1))
	b := make([]byte, 0, 39+tokens.MACLen)
	b = append(b, 2)
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, uint32(idx))
	b = binary.BigEndian.AppendUint16(b, uint16(shard))
	b = binary.BigEndian.AppendUint64(b, uint64(generation[shard]))
	b = binary.BigEndian.AppendUint32(b, 0) // retries
	b = binary.BigEndian.AppendUint64(b, mrand.Uint64())
	b = binary.BigEndian.AppendUint32(b, 1) // the key id of the migration's key
	mac := make([]byte, tokens.MACLen)
	_, _ = rand.Read(mac)
	return base64.RawURLEncoding.EncodeToString(append(b, mac...))
}

// inventMethods sends --abuse-methods requests with invented HTTP methods, and measures
// /metrics before and after.
func (a *abuseRun) inventMethods(ctx context.Context) {
	const name = "invented HTTP methods"
	before := a.metricsSize(ctx)
	for i := range a.r.cfg.AbuseMethods {
		if ctx.Err() != nil {
			return
		}
		inst := a.r.env.instances[i%len(a.r.env.instances)]
		req, _ := http.NewRequestWithContext(ctx, fmt.Sprintf("ABUSE%05d", i), inst.url+"/v1/submissions", nil)
		resp, err := a.hc.Do(req)
		if err != nil {
			a.answered(name, "error")
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		a.answered(name, strconv.Itoa(resp.StatusCode))
	}
	a.note(name, "/metrics %s before, %s after", progress.Bytes(before), progress.Bytes(a.metricsSize(ctx)))
}

// metricsSize returns the size of GET /metrics of the first instance.
func (a *abuseRun) metricsSize(ctx context.Context) int64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.r.env.instances[0].url+"/metrics", nil)
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, resp.Body)
	return n
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

// report adds the rows of the abuse workload.
func (a *abuseRun) report(ctx context.Context, uploads, readers stallResults, finished bool) {
	r := a.r
	for i, inst := range r.env.instances {
		peak := a.peakRSS[i].Load()
		note := "VmHWM at the end"
		if hwm, err := procStatusKB(inst.cmd.Process.Pid, "VmHWM"); err == nil {
			peak = max(peak, hwm)
		} else {
			note = "the highest VmRSS polled: the instance has exited"
		}
		r.report.add(measured(fmt.Sprintf("abuse.peak_rss_mb.%d", i), fmt.Sprintf("peak RSS of instance %d", i), kbToMB(peak), unitMB).
			want("<", abuseRSSTargetMB).note("%s", note))
	}
	r.report.add(
		measured("abuse.oldest_renewal", "oldest renewal of a held shard", time.Duration(a.oldestRenew.Load()).Seconds(), unitSeconds).
			want("<", a.soft.Seconds()).note("the soft expiry (claim_soft_expiry); a renewal every claim_renew_interval"),
		measured("abuse.oldest_heartbeat", "oldest heartbeat of an instance", time.Duration(a.oldestBeat.Load()).Seconds(), unitSeconds).
			note("no target"),
	)
	readyNote := ""
	if f, ok := a.readyzFirst.Load().(string); ok {
		readyNote = "the first: " + f
	}
	r.report.add(measured("abuse.readyz_failures", "/readyz answers other than 200", float64(a.readyzFailed.Load()), unitCount).
		want("==", 0).note("%s", readyNote))
	// A 503 with Retry-After is the designed refusal beyond a limit (the stalled uploads
	// and readers fill the ingest and results slots on purpose); any other 5xx is a fault.
	refused, faults := map[string]int{}, map[string]int{}
	total := 0
	for k, n := range a.counter.fivexx() {
		if strings.Contains(k, "(Retry-After)") {
			refused[k] = n
			continue
		}
		faults[k] = n
		total += n
	}
	r.report.add(
		measured("abuse.5xx", "5xx answers other than 503 with Retry-After", float64(total), unitCount).want("==", 0).note("%s", summarizeStatuses(faults)),
		measured("abuse.503", "503 with Retry-After (a limit refused the request)", float64(sumCounts(refused)), unitCount).note("%s", summarizeStatuses(refused)),
	)

	// The burn-down's ledger against the database.
	st, err := a.ledger.check(ctx, a.db)
	if err != nil {
		r.broke("abuse: checking the burn-down: %v", err)
	} else {
		r.report.add(
			measured("abuse.burndown_chunks", "burn-down chunks submitted", float64(st.chunks), unitCount).
				note("%d submissions; %d completed, %d failed, %d in progress", st.submissions, st.subsCompleted, st.subsFailed, st.subsOpen),
			measured("abuse.completed_zero", "burn-down chunks never completed", float64(st.zero), unitCount).want("==", 0),
			measured("abuse.completed_twice", "burn-down chunks completed twice", float64(st.twice), unitCount).want("==", 0),
			measured("abuse.completed_by_forger", "burn-down chunks completed by a forged token", float64(st.forged), unitCount).want("==", 0),
		)
		if st.zero > 0 || st.twice > 0 || st.forged > 0 {
			r.broke("abuse: burn-down chunks completed other than once by their consumers: %d never, %d twice, %d by a forged token",
				st.zero, st.twice, st.forged)
		}
		if !finished {
			r.broke("abuse: the burn-down did not finish within %s of the attacks' end", abuseDrainTimeout)
		}
	}

	// Hostile submissions created.
	created := a.hostileCreated(ctx)
	r.report.add(measured("abuse.hostile_created", "submissions of hostile inputs created", float64(len(created)), unitCount).
		want("==", 0).note("%s", strings.Join(created, ", ")))

	r.report.add(
		measured("abuse.stalled_uploads_cut", fmt.Sprintf("stalled NDJSON uploads cut, of %d", uploads.n), float64(uploads.cut), unitCount).
			want(">=", float64(uploads.n)).note("%s; held %s", uploads.summary(), progress.Duration(a.r.cfg.AbuseDuration)),
		measured("abuse.stalled_readers_cut", fmt.Sprintf("stalled results readers cut, of %d", readers.n), float64(readers.cut), unitCount).
			want(">=", float64(readers.n)).note("%s", readers.summary()),
	)

	// Each hostile request: the answers other than the design's.
	a.mu.Lock()
	names := slices.Sorted(maps.Keys(a.mu.answers))
	answers, notes := a.mu.answers, a.mu.notes
	a.mu.Unlock()
	for _, hr := range a.hostileRequests([]string{"t"}) {
		if !slices.Contains(names, hr.name) {
			continue
		}
		names = slices.DeleteFunc(names, func(n string) bool { return n == hr.name })
		want := strconv.Itoa(hr.want)
		other := 0
		for status, n := range answers[hr.name] {
			// A submission refused with 503 busy (the ingest slots were full of stalled
			// uploads) is refused too, and created nothing: the designed answer then.
			if status != want && !(hr.path == "/v1/submissions" && status == "503") {
				other += n
			}
		}
		if hr.path == "/v1/submissions" {
			want += " or 503 busy"
		}
		note := summarizeStatuses(answers[hr.name])
		if n := notes[hr.name]; n != "" {
			note += "; " + n
		}
		r.report.add(measured("abuse.input."+abuseKey(hr.name), hr.name+": answers other than "+want, float64(other), unitCount).
			want("==", 0).note("%s", note))
	}
	for _, name := range names { // forged tokens, invented methods
		want := map[string]string{"forged tokens": string(wire.StatusUnknown), "invented HTTP methods": "405"}[name]
		other := 0
		for status, n := range answers[name] {
			if status != want {
				other += n
			}
		}
		note := summarizeStatuses(answers[name])
		if n := notes[name]; n != "" {
			note += "; " + n
		}
		r.report.add(measured("abuse.input."+abuseKey(name), name+": answers other than "+want, float64(other), unitCount).
			want("==", 0).note("%s", note))
	}
	r.say("abuse: peak RSS %s; oldest renewal %s; %d 5xx answers; burn-down %s chunks; %d hostile submissions created",
		a.peakSummary(), progress.Duration(time.Duration(a.oldestRenew.Load())), total, progress.GroupDigits(st.chunks), len(created))
}

func (a *abuseRun) peakSummary() string {
	var parts []string
	for i := range a.peakRSS {
		parts = append(parts, fmt.Sprintf("%.0f MB", kbToMB(a.peakRSS[i].Load())))
	}
	return strings.Join(parts, ", ")
}

var nonKeyChars = regexp.MustCompile(`[^a-z0-9]+`)

// abuseKey makes a report key of a hostile request's name.
func abuseKey(name string) string {
	return strings.Trim(nonKeyChars.ReplaceAllString(strings.ToLower(name), "_"), "_")
}

// hostileCreated lists the submissions that hostile requests created: those whose answer
// said so, and those carrying the abuse tag (a request that timed out may have committed).
func (a *abuseRun) hostileCreated(ctx context.Context) []string {
	a.mu.Lock()
	found := maps.Clone(a.mu.created)
	a.mu.Unlock()
	rows, err := a.db.Query(ctx, `SELECT submission_id::text, value #>> '{}' FROM opsq.strategic_metadata WHERE key = $1`, abuseTag)
	if err == nil {
		var id, name string
		_, _ = pgx.ForEachRow(rows, []any{&id, &name}, func() error {
			if _, ok := found[id]; !ok {
				found[id] = name
			}
			return nil
		})
	}
	var out []string
	for id, name := range found {
		out = append(out, fmt.Sprintf("%s (%s)", name, id))
	}
	slices.Sort(out)
	return out
}

// summarizeStatuses writes counts by status: "400×3, 201×1".
func summarizeStatuses(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// statusCounter counts the 5xx answers of every request of the workload, by route.
type statusCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func newStatusCounter() *statusCounter { return &statusCounter{n: map[string]int{}} }

func (s *statusCounter) add(route string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[fmt.Sprintf("%s %d", route, code)]++
}

// sumCounts adds up the counts of m.
func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (s *statusCounter) fivexx() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.n)
}

// wrap returns a RoundTripper that counts the 5xx answers of base.
func (s *statusCounter) wrap(base http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(req)
		if err == nil && resp.StatusCode >= 500 {
			route := req.Method + " " + routeOf(req.URL)
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
				route += " (Retry-After)" // a refusal by design: a limit, or the database away
			}
			s.add(route, resp.StatusCode)
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

var idSegment = regexp.MustCompile(`/[0-9]+(/|$)`)

// routeOf names the route of a URL: its path with ids replaced by {id}.
func routeOf(u *url.URL) string {
	return idSegment.ReplaceAllString(u.Path, "/{id}$1")
}

// abuseLedger records the burn-down: its submissions, every delivery and every answer to
// our completions. Safe for concurrent use.
type abuseLedger struct {
	errors atomic.Int64 // requests of the burn-down that failed (retried)

	mu struct {
		sync.Mutex
		totals    map[int64]int64
		ids       []int64
		delivered map[abuseChunk][]string // the tokens each chunk was delivered with
		completed map[abuseChunk]int      // our completions answered "completed"
		recent    []string                // a ring of recent tokens, for the forger
		next      int
		count     int64
	}
}

type abuseChunk struct {
	sub int64
	idx int64
}

func newAbuseLedger() *abuseLedger {
	l := &abuseLedger{}
	l.mu.totals, l.mu.delivered, l.mu.completed = map[int64]int64{}, map[abuseChunk][]string{}, map[abuseChunk]int{}
	return l
}

func (l *abuseLedger) addSubmission(id, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.totals[id] = total
	l.mu.ids = append(l.mu.ids, id)
}

func (l *abuseLedger) submissionIDs() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.ids)
}

// randomSubmission returns one of the last few burn-down submissions and its size.
func (l *abuseLedger) randomSubmission() (int64, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.ids) == 0 {
		return 0, 0
	}
	id := l.mu.ids[len(l.mu.ids)-1-mrand.IntN(min(len(l.mu.ids), 8))]
	return id, l.mu.totals[id]
}

func (l *abuseLedger) deliver(ch wire.ReservedChunk) {
	id, _ := strconv.ParseInt(ch.SubmissionID, 10, 64)
	k := abuseChunk{id, ch.ChunkIndex}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.delivered[k] = append(l.mu.delivered[k], ch.Token)
	const ring = 1024
	if len(l.mu.recent) < ring {
		l.mu.recent = append(l.mu.recent, ch.Token)
	} else {
		l.mu.recent[l.mu.next%ring] = ch.Token
	}
	l.mu.next++
}

func (l *abuseLedger) recentToken() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mu.recent) == 0 {
		return ""
	}
	return l.mu.recent[mrand.IntN(len(l.mu.recent))]
}

func (l *abuseLedger) answered(ch wire.ReservedChunk, status wire.TokenStatus) {
	if status != wire.StatusCompleted {
		return
	}
	id, _ := strconv.ParseInt(ch.SubmissionID, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.completed[abuseChunk{id, ch.ChunkIndex}]++
	l.mu.count++
}

func (l *abuseLedger) completedCount() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.count
}

// abuseLedgerStats is the ledger's check against the database.
type abuseLedgerStats struct {
	submissions, subsCompleted, subsFailed, subsOpen int
	chunks                                           int64
	zero, twice, forged                              int64
}

// check compares the ledger with opsq.chunks_completed: every chunk of every burn-down
// submission completed once, with the output (the token) of one of its deliveries, and
// answered "completed" to one completion of ours.
func (l *abuseLedger) check(ctx context.Context, db *pgxpool.Pool) (abuseLedgerStats, error) {
	ids := l.submissionIDs()
	var st abuseLedgerStats
	st.submissions = len(ids)
	rows, err := db.Query(ctx, `SELECT state, count(*) FROM opsq.submission_status WHERE id = ANY($1) GROUP BY state`, ids)
	if err != nil {
		return st, err
	}
	var state wire.State
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		switch state {
		case wire.StateCompleted:
			st.subsCompleted += n
		case wire.StateFailed:
			st.subsFailed += n
		default:
			st.subsOpen += n
		}
		return nil
	}); err != nil {
		return st, err
	}
	done := map[abuseChunk]string{}
	rows, err = db.Query(ctx, `SELECT submission_id, chunk_index, output FROM opsq.chunks_completed WHERE submission_id = ANY($1)`, ids)
	if err != nil {
		return st, err
	}
	var k abuseChunk
	var output []byte
	if _, err := pgx.ForEachRow(rows, []any{&k.sub, &k.idx, &output}, func() error {
		if _, dup := done[k]; dup {
			st.twice++
		}
		done[k] = string(output)
		return nil
	}); err != nil {
		return st, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		for idx := range l.mu.totals[id] {
			st.chunks++
			k := abuseChunk{id, idx}
			out, ok := done[k]
			switch {
			case !ok:
				st.zero++
			case !slices.Contains(l.mu.delivered[k], out):
				st.forged++
			case l.mu.completed[k] > 1:
				st.twice++
			}
		}
	}
	return st, nil
}
