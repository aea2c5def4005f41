package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/cmd/opsq/progress"
)

// The abuse workload (DESIGN.md §6, last line; issue 7): every hostile input of §3 and §8
// against the instances while a burn-down goes on — producers submitting, consumers
// completing, a ledger of every delivery. It measures what the hostile clients cost: the
// peak RSS of each instance, the oldest renewal of a claim and the oldest heartbeat, the
// 5xx answers by route, the chunks of the burn-down completed other than once, and how each
// hostile request was answered. It reports; only the burn-down's integrity (a chunk lost,
// completed twice or by a forged token) counts as broken.
//
// This file is the workload's driver: it prepares the cases, runs them side by side with
// the burn-down (abuse_burndown.go) while it samples the instances, and reports. Each
// attack is a case in a file of its own, named for it (abuse_*.go; see cases).

// Targets and sizes of the abuse workload; the sizes of one attack are in its file.
const (
	abuseRSSTargetMB    = 512 // DESIGN.md §6: every instance under 512 MB
	abuseTag            = "opsq_abuse"
	abuseBenchKey       = "opsq_bench"
	abuseBurnChunks     = 200                    // chunks of each burn-down submission
	abuseSubmitEvery    = 250 * time.Millisecond // a burn-down submission this often
	abuseConsumers      = 16
	abuseDrainTimeout   = 90 * time.Second // for the burn-down to finish after the attacks
	abuseRequestTimeout = 120 * time.Second
	abuseSampleEvery    = 250 * time.Millisecond
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

// abuseCase is one attack of the workload, or a family of close ones, in a file of its own
// named for it: adding an attack is adding a file and a row to cases. The workload
// prepares the cases one after the other, runs them side by side with the burn-down, then
// adds their rows to the report one after the other. A case's functions share its state
// (the row is made by a function of its file); they are never called concurrently.
type abuseCase struct {
	// prepare, if set, makes what the attack needs before the burn-down starts, and
	// returns the submissions it made, which the workload discards at its end.
	prepare func(ctx context.Context) (discard []string, err error)
	// run sends the attack. A held attack lasts --abuse-duration: its ctx ends then. The
	// others are sent whole, however long that takes.
	run  func(ctx context.Context)
	held bool
	// report, if set, adds the attack's rows to the report, after the workload's own.
	report func()
}

// cases lists the attacks, in the order they are prepared, started and reported.
func (a *abuseRun) cases() []abuseCase {
	return []abuseCase{
		a.stalledUploadsCase(),   // abuse_stalls.go
		a.stalledReadersCase(),   // abuse_stalls.go
		a.hostileInputsCase(),    // abuse_inputs.go: abuse_bounds.go, abuse_auth.go, abuse_reserve.go
		a.forgedTokensCase(),     // abuse_forged_tokens.go
		a.inventedMethodsCase(),  // abuse_methods.go
		a.memoryAttacksCase(),    // abuse_memory.go
		a.tricklingUploadsCase(), // abuse_memory.go
	}
}

// run prepares the backlogs, starts the samplers and the burn-down, runs the attacks for
// --abuse-duration, lets the burn-down finish, and reports.
func (a *abuseRun) run(ctx context.Context) error {
	cfg := a.r.cfg
	cases := a.cases()
	a.r.line.Show("abuse: preparing the results stream, the target chunks and the big backlog")
	var prepared []string
	for _, c := range cases {
		if c.prepare == nil {
			continue
		}
		ids, err := c.prepare(ctx)
		if err != nil {
			return err
		}
		prepared = append(prepared, ids...)
	}
	defer func() { // their reservations would hold up the instances' shutdown
		for _, id := range prepared {
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
	// The held attacks (the stalls) last the duration; every other attack is sent whole,
	// however long it takes.
	actx, stopAttacks := context.WithTimeout(ctx, cfg.AbuseDuration)
	defer stopAttacks()
	var attacks sync.WaitGroup
	for _, c := range cases {
		cctx := ctx
		if c.held {
			cctx = actx
		}
		attacks.Go(func() { c.run(cctx) })
	}
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
	a.report(ctx, cases, finished)
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

// report adds the rows of the abuse workload, then those of each case.
func (a *abuseRun) report(ctx context.Context, cases []abuseCase, finished bool) {
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

	for _, c := range cases {
		if c.report != nil {
			c.report()
		}
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

// reportAnswers adds the row of the hostile request name, if it was sent: how many of its
// answers were other than want, the design's answer, which designed tells apart; its note
// sums up the answers and adds the request's note.
func (a *abuseRun) reportAnswers(name, want string, designed func(status string) bool) {
	a.mu.Lock()
	answers, note := a.mu.answers[name], a.mu.notes[name]
	a.mu.Unlock()
	if answers == nil {
		return
	}
	other := 0
	for status, n := range answers {
		if !designed(status) {
			other += n
		}
	}
	summary := summarizeStatuses(answers)
	if note != "" {
		summary += "; " + note
	}
	a.r.report.add(measured("abuse.input."+abuseKey(name), name+": answers other than "+want, float64(other), unitCount).
		want("==", 0).note("%s", summary))
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
