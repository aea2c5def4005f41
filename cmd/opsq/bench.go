package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"opsq/client"
	"opsq/strategy"
)

// "opsq bench" measures opsq end to end, as a user would run it: real "opsq serve"
// processes on a scratch database, consumers over HTTP on loopback. It prints each
// measurement beside its target in DESIGN.md §6. Speed never makes it fail: only
// something broken does (a chunk lost or handed out twice, an error).

// Workloads, in the order "opsq bench --help" lists them.
const (
	workloadIngest   = "ingest"
	workloadBurndown = "burndown"
	workloadLatency  = "latency"
	workloadDistinct = "distinct"
	workloadRSS      = "rss"
	workloadAbuse    = "abuse"
	workloadParked   = "parked"
)

var benchWorkloads = []string{workloadIngest, workloadBurndown, workloadLatency, workloadDistinct, workloadRSS, workloadParked, workloadAbuse}

// benchConfig is what the flags of "opsq bench" ask for.
type benchConfig struct {
	databaseURL     string
	devCluster      string
	instances       int
	workloads       []string
	ingestChunks    int64
	burndownChunks  int64
	consumers       int
	max             int
	backlogs        []int64
	strategies      []strategy.Node
	samples         int
	rssReservations int64
	riverRate       float64
	json            bool

	distinctSubmissions int64
	distinctValues      int64
	distinctHeld        int

	abuseDuration   time.Duration
	abuseStalls     int
	abuseForged     int
	abuseMethods    int
	abuseBigChunks  int
	abuseKeys       int
	parkedConsumers int
	parkedProducers int
}

// Defaults of the flags of "opsq bench"; the sizes are those of DESIGN.md §6, except the
// large latency backlog (4 000 000 there), which takes minutes to insert. DESIGN.md names
// no number of values or of held reservations for PreferDistinct: 2 000 values of 100
// submissions each, a quarter of them saturated.
const (
	benchDevClusterDefault          = ".data/pg"
	benchInstancesDefault           = 2
	benchWorkloadsDefault           = "ingest,burndown,latency,distinct"
	benchIngestChunksDefault        = 1_000_000
	benchBurndownChunksDefault      = 300_000
	benchConsumersDefault           = 64
	benchMaxDefault                 = 10
	benchBacklogsDefault            = "10000,1000000"
	benchSamplesDefault             = 2000
	benchRSSReservationsDefault     = 100_000
	benchDistinctSubmissionsDefault = 200_000
	benchDistinctValuesDefault      = 2_000
	benchDistinctHeldDefault        = 500
	benchAbuseDurationDefault       = 60 * time.Second
	benchAbuseStallsDefault         = 100
	benchAbuseForgedDefault         = 10_000
	benchAbuseMethodsDefault        = 3_000
	benchAbuseBigChunksDefault      = 10_000
	benchAbuseKeysDefault           = 300_000
)

// latencyWarmup is how many reserves the latency workload makes, untimed, before it
// measures: they open the connection and fill the caches.
const latencyWarmup = 20

func parseBenchArgs(args []string, stderr io.Writer) (benchConfig, error) {
	fs := flag.NewFlagSet("opsq bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := benchConfig{ingestChunks: benchIngestChunksDefault, burndownChunks: benchBurndownChunksDefault,
		rssReservations: benchRSSReservationsDefault, distinctSubmissions: benchDistinctSubmissionsDefault,
		distinctValues: benchDistinctValuesDefault}
	envString(fs, &cfg.databaseURL, "database-url", "OPSQ_DATABASE_URL", "",
		"PostgreSQL `URL` of the server to measure on; the bench creates a scratch database opsq_bench_<pid> through this URL's database, and drops it at the end")
	envString(fs, &cfg.devCluster, "dev-cluster", "OPSQ_DEV_CLUSTER", benchDevClusterDefault,
		"without a database URL, start or reuse the local development PostgreSQL cluster in this `directory`, as make run does, and use a scratch database in it")
	fs.IntVar(&cfg.instances, "instances", benchInstancesDefault, "`N` opsq serve processes to start, 1 to 16")
	workloadList := fs.String("workload", benchWorkloadsDefault, "comma-separated `list` of workloads to run, in that order: "+strings.Join(benchWorkloads, ", "))
	fs.Var((*countFlag)(&cfg.ingestChunks), "ingest-chunks", "ingest: `N` chunks in the one NDJSON submission that is timed (counts take k and M: 10k, 1M)")
	fs.Var((*countFlag)(&cfg.burndownChunks), "burndown-chunks", "burndown: `N` chunks in the backlog the consumers burn down")
	fs.IntVar(&cfg.consumers, "consumers", benchConsumersDefault, "burndown: `N` concurrent consumers, consumer i talking to instance i % --instances")
	fs.IntVar(&cfg.max, "max", benchMaxDefault, "burndown: `N` chunks asked for by each reserve, 1 to 10000")
	backlogList := fs.String("backlogs", benchBacklogsDefault, "latency: comma-separated backlog `sizes` to measure the reserve latency at (DESIGN.md §6 names 4M)")
	strategyList := fs.String("strategies", "random", "latency: `list` of strategies, separated by ';', in the text or JSON form, each timed at every backlog size (the targets are random's)")
	fs.IntVar(&cfg.samples, "samples", benchSamplesDefault, "latency, distinct: `N` reserves timed at each backlog size, and with prefer_distinct")
	fs.Var((*countFlag)(&cfg.distinctSubmissions), "distinct-submissions", "distinct: `N` single-chunk submissions in the backlog")
	fs.Var((*countFlag)(&cfg.distinctValues), "distinct-values", "distinct: `N` values of company_id over the submissions (submission i has i % N)")
	fs.IntVar(&cfg.distinctHeld, "distinct-held", benchDistinctHeldDefault, "distinct: `N` reservations held, each saturating its value, while the reserves are timed; fewer than --distinct-values")
	fs.IntVar(&cfg.parkedConsumers, "parked-consumers", benchParkedConsumersDefault, "parked: `N` consumers parked (reserve max 1, wait 60s) before as many chunks arrive")
	fs.IntVar(&cfg.parkedProducers, "parked-producers", benchParkedProducersDefault, "parked: `N` producers waiting on their one-chunk submissions (status ?wait=60s) while they are completed")
	fs.Var((*countFlag)(&cfg.rssReservations), "rss-reservations", "rss: `N` live reservations held by instance 0 when its memory is read")
	fs.Float64Var(&cfg.riverRate, "river-rate", 0, "burndown: the target `rate`, jobs/s of River's own bench burn-down on the same PostgreSQL (0: not compared)")
	fs.DurationVar(&cfg.abuseDuration, "abuse-duration", benchAbuseDurationDefault, "abuse: how long the attacks last (the stalled requests are held that long) while the burn-down goes on")
	fs.IntVar(&cfg.abuseStalls, "abuse-stalls", benchAbuseStallsDefault, "abuse: `N` stalled NDJSON uploads, and N stalled results readers")
	fs.IntVar(&cfg.abuseForged, "abuse-forged", benchAbuseForgedDefault, "abuse: `N` forged tokens sent to complete and to fail (retry false)")
	fs.IntVar(&cfg.abuseMethods, "abuse-methods", benchAbuseMethodsDefault, "abuse: `N` requests with invented HTTP methods")
	fs.IntVar(&cfg.abuseBigChunks, "abuse-big-chunks", benchAbuseBigChunksDefault, "abuse: `N` chunks of 1 KiB under 60 KiB of metadata, reserved with max min(N, 10000) through each instance")
	fs.IntVar(&cfg.abuseKeys, "abuse-keys", benchAbuseKeysDefault, "abuse: `N` strategic metadata keys in one hostile submission (the bound is 32)")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `usage: opsq bench [flags]

Measures opsq end to end against the targets of DESIGN.md §6: it starts --instances real
"opsq serve" processes of this binary on a scratch database, runs the workloads with
consumers over HTTP on loopback, and prints each measurement beside its target. It exits
with status 0 whether the targets are met or not; only something broken (a chunk lost or
handed out twice, an error) makes it fail.

workloads:
  ingest    one NDJSON submission of --ingest-chunks chunks: seconds and chunks/s
  burndown  --consumers consumers reserve and complete a --burndown-chunks backlog: chunks/s,
            chunks handed out twice
  latency   one consumer times --samples reserves (max 1, random) at each --backlogs size
  distinct  --distinct-submissions single-chunk submissions (inserted with COPY, not through
            the API) over --distinct-values values of company_id; one consumer holds
            --distinct-held reservations, then times --samples reserves (max 1, prefer_distinct
            max 1, then random): percentiles, and how many gave a saturated value
  rss       instance 0 holds --rss-reservations reservations: its resident memory
  abuse     every hostile input of DESIGN.md §3 and §8 (bounds pushed past their limits,
            --abuse-stalls stalled uploads and results readers, --abuse-forged forged
            tokens, --abuse-methods invented methods, a reserve of max 10 000 over big
            chunks) for --abuse-duration while a burn-down goes on: peak RSS, oldest
            renewal, 5xx answers, burn-down chunks completed other than once, the answers
            to each hostile request (not in the default list: run it with --workload abuse)
  parked    --parked-consumers consumers long-poll, then as many chunks arrive: how long until
            all are served, and the instances' memory per parked consumer; then
            --parked-producers producers wait on their submissions while they are completed:
            how long after its last completion each is told

flags:`)
		printFlagDefaults(fs)
	}
	if err := fs.Parse(args); err != nil {
		return cfg, parseError(err)
	}
	usageError := func(format string, args ...any) error {
		fmt.Fprintf(fs.Output(), "opsq bench: %s\n\n", fmt.Sprintf(format, args...))
		fs.Usage()
		return errUsage
	}
	if fs.NArg() > 0 {
		return cfg, usageError("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.workloads, err = parseWorkloads(*workloadList); err != nil {
		return cfg, usageError("--workload: %v", err)
	}
	if cfg.backlogs, err = parseCounts(*backlogList); err != nil {
		return cfg, usageError("--backlogs: %v", err)
	}
	for _, text := range strings.Split(*strategyList, ";") {
		n, err := strategy.ParseAny(text)
		if err != nil {
			return cfg, usageError("--strategies: %v", err)
		}
		cfg.strategies = append(cfg.strategies, n)
	}
	switch {
	case cfg.instances < 1 || cfg.instances > 16:
		return cfg, usageError("--instances %d: want 1 to 16", cfg.instances)
	case cfg.ingestChunks < 1:
		return cfg, usageError("--ingest-chunks %d: want 1 or more", cfg.ingestChunks)
	case cfg.burndownChunks < 1:
		return cfg, usageError("--burndown-chunks %d: want 1 or more", cfg.burndownChunks)
	case cfg.consumers < 1 || cfg.consumers > 4096:
		return cfg, usageError("--consumers %d: want 1 to 4096", cfg.consumers)
	case cfg.max < 1 || cfg.max > client.MaxReserveChunks:
		return cfg, usageError("--max %d: want 1 to %d", cfg.max, client.MaxReserveChunks)
	case cfg.samples < 1:
		return cfg, usageError("--samples %d: want 1 or more", cfg.samples)
	case cfg.distinctValues > cfg.distinctSubmissions:
		return cfg, usageError("--distinct-values %d: want at most --distinct-submissions (%d)", cfg.distinctValues, cfg.distinctSubmissions)
	case cfg.distinctHeld < 0 || int64(cfg.distinctHeld) >= cfg.distinctValues:
		return cfg, usageError("--distinct-held %d: want 0 to %d, fewer than --distinct-values, so that unsaturated values remain",
			cfg.distinctHeld, cfg.distinctValues-1)
	case cfg.parkedConsumers < 1 || cfg.parkedProducers < 1:
		return cfg, usageError("--parked-consumers %d, --parked-producers %d: want 1 or more", cfg.parkedConsumers, cfg.parkedProducers)
	case cfg.rssReservations < 1:
		return cfg, usageError("--rss-reservations %d: want 1 or more", cfg.rssReservations)
	case cfg.riverRate < 0:
		return cfg, usageError("--river-rate %g: want 0 (not compared) or more", cfg.riverRate)
	case cfg.abuseDuration < time.Second || cfg.abuseDuration > time.Hour:
		return cfg, usageError("--abuse-duration %s: want 1s to 1h", cfg.abuseDuration)
	case cfg.abuseStalls < 0 || cfg.abuseStalls > 10_000:
		return cfg, usageError("--abuse-stalls %d: want 0 to 10000", cfg.abuseStalls)
	case cfg.abuseForged < 0 || cfg.abuseForged > 10_000_000:
		return cfg, usageError("--abuse-forged %d: want 0 to 10000000", cfg.abuseForged)
	case cfg.abuseMethods < 0 || cfg.abuseMethods > 1_000_000:
		return cfg, usageError("--abuse-methods %d: want 0 to 1000000", cfg.abuseMethods)
	case cfg.abuseBigChunks < 1 || cfg.abuseBigChunks > 100_000:
		return cfg, usageError("--abuse-big-chunks %d: want 1 to 100000", cfg.abuseBigChunks)
	case cfg.abuseKeys < 33 || cfg.abuseKeys > 10_000_000:
		return cfg, usageError("--abuse-keys %d: want 33 (one past the bound) to 10000000", cfg.abuseKeys)
	}
	if need := int64(len(cfg.strategies) * (cfg.samples + latencyWarmup)); slices.Contains(cfg.workloads, workloadLatency) && slices.Min(cfg.backlogs) <= need {
		return cfg, usageError("--backlogs %s: each backlog must be larger than the %d reserves that consume it (%d strategies × (--samples %d + %d to warm up))",
			*backlogList, need, len(cfg.strategies), cfg.samples, latencyWarmup)
	}
	if need := int64(cfg.distinctHeld + cfg.samples + latencyWarmup); slices.Contains(cfg.workloads, workloadDistinct) && cfg.distinctSubmissions <= need {
		return cfg, usageError("--distinct-submissions %d: must be larger than the %d reserves that consume them (--distinct-held %d + --samples %d + %d to warm up)",
			cfg.distinctSubmissions, need, cfg.distinctHeld, cfg.samples, latencyWarmup)
	}
	return cfg, nil
}

// parseWorkloads parses a comma-separated list of known workloads, each at most once.
func parseWorkloads(list string) ([]string, error) {
	var out []string
	for w := range strings.SplitSeq(list, ",") {
		w = strings.TrimSpace(w)
		switch {
		case w == "":
			continue
		case !slices.Contains(benchWorkloads, w):
			return nil, fmt.Errorf("unknown workload %q: want %s", w, strings.Join(benchWorkloads, ", "))
		case slices.Contains(out, w):
			return nil, fmt.Errorf("workload %q given twice", w)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no workload: want one or more of %s", strings.Join(benchWorkloads, ", "))
	}
	return out, nil
}

// parseCounts parses a comma-separated list of counts, such as "10000,1M".
func parseCounts(list string) ([]int64, error) {
	var out []int64
	for s := range strings.SplitSeq(list, ",") {
		var c countFlag
		if err := c.Set(strings.TrimSpace(s)); err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, int64(c))
	}
	return out, nil
}

// countFlag is a flag value of a positive count: "1000000", "1_000_000", "1000k" or "1M".
type countFlag int64

func (c *countFlag) String() string { return strconv.FormatInt(int64(*c), 10) }

func (c *countFlag) Set(s string) error {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		s, mult = strings.TrimSuffix(s, "k"), 1_000
	case strings.HasSuffix(s, "M"):
		s, mult = strings.TrimSuffix(s, "M"), 1_000_000
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || n < 1 || n > (1<<31-1)/mult { // chunk indexes are int32
		return errors.New("want a count such as 10000, 10k or 1M, from 1 to 2^31-1")
	}
	*c = countFlag(n * mult)
	return nil
}

// printFlagDefaults is flag.PrintDefaults with every default shown, zero values included.
func printFlagDefaults(fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(fs.Output(), "  %s\n    \t%s (default %s)\n", strings.TrimSpace("--"+f.Name+" "+name), strings.ReplaceAll(usage, "\n", "\n    \t"), def)
	})
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseBenchArgs(args, stderr)
	if err != nil {
		return err
	}
	log, _ := newLogger("info", stderr) // devDatabase says which cluster it uses
	started := time.Now()
	loadStart := loadAverage()
	env, err := startBenchEnv(ctx, cfg, stderr, log)
	if err != nil {
		return interrupted(ctx, err)
	}
	r := &benchRun{cfg: cfg, env: env, line: newLiveLine(stderr),
		report: benchReport{Rows: []benchRow{}, Missed: []string{}, Broken: []string{}}} // [] in JSON, not null
	r.report.Environment = env.info(cfg)
	r.report.Environment.Started, r.report.Environment.LoadStart = started, loadStart
	fmt.Fprintf(stderr, "opsq bench: %s\n", r.report.Environment.describe())

	runErr := r.runWorkloads(ctx)
	if runErr != nil {
		runErr = interrupted(ctx, errors.Join(runErr, env.exited()))
		r.report.Error = runErr.Error()
	}
	failed := runErr != nil || len(r.report.Broken) > 0
	env.close(failed)
	r.report.Environment.LoadEnd = loadAverage()
	r.report.Environment.Seconds = time.Since(started).Seconds()

	if cfg.json {
		err = printJSON(stdout, r.report)
	} else {
		err = r.report.writeTable(stdout)
	}
	switch {
	case runErr != nil:
		return runErr
	case len(r.report.Broken) > 0:
		return fmt.Errorf("something broke: %s", strings.Join(r.report.Broken, "; "))
	}
	return err
}

// interrupted says "interrupted" for an error that Ctrl-C caused.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return errors.New("interrupted")
	}
	return err
}

// benchRun is one run of the bench: its configuration, where it runs, and what it found
// so far. Its workloads run one after the other; it is not safe for concurrent use.
type benchRun struct {
	cfg    benchConfig
	env    *benchEnv
	line   *liveLine // progress on stderr
	report benchReport
}

// runWorkloads runs the configured workloads in order, stopping at the first error.
func (r *benchRun) runWorkloads(ctx context.Context) error {
	run := map[string]func(context.Context) error{
		workloadIngest:   r.ingest,
		workloadBurndown: r.burndown,
		workloadLatency:  r.latency,
		workloadDistinct: r.distinct,
		workloadRSS:      r.rss,
		workloadAbuse:    r.abuse,
		workloadParked:   r.parked,
	}
	for _, w := range r.cfg.workloads {
		if err := run[w](ctx); err != nil {
			r.line.clear()
			return fmt.Errorf("%s: %w", w, err)
		}
	}
	return nil
}

// say writes a line of progress that stays, such as a workload's summary.
func (r *benchRun) say(format string, args ...any) {
	r.line.clear()
	fmt.Fprintf(r.line.w, format+"\n", args...)
}

// broke records something that must never happen, such as a chunk handed out twice: the
// bench goes on, and fails at the end.
func (r *benchRun) broke(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.report.Broken = append(r.report.Broken, msg)
	r.say("BROKEN: %s", msg)
}

// showProgress shows describe() on the live line, as often as the line wants, until stop
// is called; stop clears the line, and may be called more than once.
func (r *benchRun) showProgress(describe func() string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.line.every())
		defer t.Stop()
		for {
			select {
			case <-quit:
				r.line.clear()
				return
			case <-t.C:
				r.line.show(describe())
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		<-done
	})
}
