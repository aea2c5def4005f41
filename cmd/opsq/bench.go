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

	"opsq/cmd/opsq/bench"
	"opsq/strategy"
)

// "opsq bench" measures opsq end to end (package opsq/cmd/opsq/bench); this file holds its
// flags and usage, and builds the bench.Config they ask for.

// benchArgs is what the flags of "opsq bench" ask for: where the database is, and the rest.
type benchArgs struct {
	databaseURL string
	devCluster  string
	bench.Config
}

// benchDevClusterDefault is the development cluster "opsq bench" uses without a database URL.
const benchDevClusterDefault = ".data/pg"

func parseBenchArgs(args []string, stderr io.Writer) (benchArgs, error) {
	fs := flag.NewFlagSet("opsq bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := benchArgs{Config: bench.Config{IngestChunks: bench.IngestChunksDefault, BurndownChunks: bench.BurndownChunksDefault,
		RSSReservations: bench.RSSReservationsDefault, DistinctSubmissions: bench.DistinctSubmissionsDefault,
		DistinctValues: bench.DistinctValuesDefault, FailureChunks: bench.FailureChunksDefault, FailureRounds: bench.FailureRoundsDefault,
		TenantChunks: bench.TenantChunksDefault, FairnessLatencyChunks: bench.FairnessLatencyChunksDefault,
		CitusConfig: bench.CitusConfig{CitusChunks: bench.CitusChunksDefault, CitusBacklog: bench.CitusBacklogDefault}}}
	benchStartsItselfFlags(fs, &cfg.Config)
	envString(fs, &cfg.databaseURL, "database-url", "OPSQ_DATABASE_URL", "",
		"PostgreSQL `URL` of the server to measure on; the bench creates a scratch database opsq_bench_<pid> through this URL's database, and drops it at the end")
	envString(fs, &cfg.devCluster, "dev-cluster", "OPSQ_DEV_CLUSTER", benchDevClusterDefault,
		"without a database URL, start or reuse the local development PostgreSQL cluster in this `directory`, as make run does, and use a scratch database in it")
	fs.IntVar(&cfg.Instances, "instances", bench.InstancesDefault, "`N` opsq serve processes to start, 1 to 16")
	fs.StringVar(&cfg.Auth, "auth", bench.AuthRequired, "the instances' OPSQ_AUTH: required (the bench makes a key of each role in the scratch database and every request carries its role's key) or off")
	workloadList := fs.String("workload", bench.WorkloadsDefault, "comma-separated `list` of workloads to run, in that order: "+strings.Join(bench.Workloads, ", "))
	fs.StringVar(workloadList, "workloads", bench.WorkloadsDefault, "the same as --workload")
	fs.Var((*countFlag)(&cfg.IngestChunks), "ingest-chunks", "ingest: `N` chunks in the one NDJSON submission that is timed (counts take k and M: 10k, 1M)")
	fs.Var((*countFlag)(&cfg.BurndownChunks), "burndown-chunks", "burndown: `N` chunks in the backlog the consumers burn down")
	fs.IntVar(&cfg.Consumers, "consumers", bench.ConsumersDefault, "burndown: `N` concurrent consumers, consumer i talking to instance i % --instances")
	fs.IntVar(&cfg.Max, "max", bench.MaxDefault, "burndown: `N` chunks asked for by each reserve, 1 to 10000")
	backlogList := fs.String("backlogs", bench.BacklogsDefault, "latency: comma-separated backlog `sizes` to measure the reserve latency at (DESIGN.md §6 names 4M)")
	strategyList := fs.String("strategies", "random", "latency: `list` of strategies, separated by ';', in the text or JSON form, each timed at every backlog size (the targets are random's)")
	fs.IntVar(&cfg.Samples, "samples", bench.SamplesDefault, "latency, distinct, tenants: `N` reserves timed at each backlog size, with prefer_distinct, and by each tenants consumer")
	fs.Var((*waitingFlag)(&cfg.Waiting), "waiting", "latency: `N` chunks that wait (a submission with not_before a day ahead) added beside each backlog once it is timed, then the backlog timed again beside them (0: none)")
	fs.BoolVar(&cfg.Vacuum, "vacuum", false, "latency: VACUUM ANALYZE the chunks after loading each backlog, before timing it (as once autovacuum has caught up)")
	fs.Var((*countFlag)(&cfg.DistinctSubmissions), "distinct-submissions", "distinct: `N` single-chunk submissions in the backlog")
	fs.Var((*countFlag)(&cfg.DistinctValues), "distinct-values", "distinct: `N` values of company_id over the submissions (submission i has i % N)")
	fs.IntVar(&cfg.DistinctHeld, "distinct-held", bench.DistinctHeldDefault, "distinct: `N` reservations held, each saturating its value, while the reserves are timed; fewer than --distinct-values")
	fs.IntVar(&cfg.ParkedConsumers, "parked-consumers", bench.ParkedConsumersDefault, "parked: `N` consumers parked (reserve max 1, wait 60s) before as many chunks arrive")
	fs.IntVar(&cfg.ParkedProducers, "parked-producers", bench.ParkedProducersDefault, "parked: `N` producers waiting on their one-chunk submissions (status ?wait=60s) while they are completed")
	fs.Var((*countFlag)(&cfg.FailureChunks), "failure-chunks", "failures: `N` chunks in each of the two submissions burnt down, the failing one and the clean one")
	fs.Float64Var(&cfg.FailureRate, "failure-rate", bench.FailureRateDefault, "failures: the `share` of its attempts that a consumer fails (retry true), 0 to 1")
	fs.IntVar(&cfg.FailureRounds, "failure-rounds", bench.FailureRoundsDefault, "failures: `N` rounds of the two burn-downs, the order alternating; the median ratio is judged")
	fs.Var((*countFlag)(&cfg.TenantChunks), "tenant-chunks", "tenants: `N` chunks in the backlog, spread evenly over 100 tenants (DESIGN.md §6's 10M takes a few minutes to insert; 1M or fewer for a quick run)")
	fs.DurationVar(&cfg.FairnessDuration, "fairness-duration", bench.FairnessDurationDefault, "fairness: how long the weighted_fair phase runs before a late value arrives (then one --fairness-window more)")
	fs.DurationVar(&cfg.FairnessWindow, "fairness-window", bench.FairnessWindowDefault, "fairness: the window over which each weighted_fair share is judged")
	fs.DurationVar(&cfg.FairnessRateDuration, "fairness-rate-duration", bench.FairnessRateDurationDefault, "fairness: how long the rate_limit phase runs")
	fs.DurationVar(&cfg.FairnessThrottle, "fairness-throttle", bench.FairnessThrottleDefault, "fairness: how long the throttle of the throttle phase lasts (its for)")
	fs.Var((*countFlag)(&cfg.FairnessLatencyChunks), "fairness-latency-chunks", "fairness: `N` chunks in the backlog the reserves of random, rate_limit and weighted_fair are timed on")
	fs.Var((*countFlag)(&cfg.CitusChunks), "citus-chunks", "citus: `N` chunks burnt down on each setup (one PostgreSQL, a single-node Citus, a coordinator and 2 workers)")
	fs.Var((*countFlag)(&cfg.CitusBacklog), "citus-backlog", "citus: `N` chunks of backlog on the coordinator and 2 workers that the reserves are timed over (DESIGN.md §6: 10M)")
	fs.IntVar(&cfg.CitusRounds, "citus-rounds", bench.CitusRoundsDefault, "citus: `N` rounds of the three burn-downs, the order alternating; the rates are the medians")
	fs.Var((*countFlag)(&cfg.RSSReservations), "rss-reservations", "rss: `N` live reservations held by instance 0 when its memory is read")
	fs.BoolVar(&cfg.River, "river", false, "burndown: first build River's burn-down (the Go module in --river-dir) and run it on the same PostgreSQL with as many jobs, then compare: jobs/s, PostgreSQL CPU and WAL per job")
	fs.StringVar(&cfg.RiverDir, "river-dir", "", "burndown --river: the `directory` of the River module (cmd/opsq/bench/river of the source tree); empty: where this binary was built from, else ./cmd/opsq/bench/river")
	fs.Float64Var(&cfg.RiverRate, "river-rate", 0, "burndown: the target `rate`, jobs/s of River's own bench burn-down on the same PostgreSQL (0: not compared; --river measures it instead)")
	fs.DurationVar(&cfg.AbuseDuration, "abuse-duration", bench.AbuseDurationDefault, "abuse: how long the attacks last (the stalled requests are held that long) while the burn-down goes on")
	fs.IntVar(&cfg.AbuseStalls, "abuse-stalls", bench.AbuseStallsDefault, "abuse: `N` stalled NDJSON uploads, and N stalled results readers")
	fs.IntVar(&cfg.AbuseForged, "abuse-forged", bench.AbuseForgedDefault, "abuse: `N` forged tokens sent to complete and to fail (retry false)")
	fs.IntVar(&cfg.AbuseMethods, "abuse-methods", bench.AbuseMethodsDefault, "abuse: `N` requests with invented HTTP methods")
	fs.IntVar(&cfg.AbuseBigChunks, "abuse-big-chunks", bench.AbuseBigChunksDefault, "abuse: `N` chunks of 1 KiB under 60 KiB of metadata, reserved with max min(N, 10000) through each instance")
	fs.IntVar(&cfg.AbuseMemoryBytes, "abuse-memory-bytes", bench.AbuseMemoryBytesDefault, "abuse: `N` bytes of each big body of the memory attacks (JSON submissions, completes, prefix); the login forms (N/3), headers (N/30) and the submissions listed (1000 × N/30 MiB) scale with it")
	fs.IntVar(&cfg.AbuseKeys, "abuse-keys", bench.AbuseKeysDefault, "abuse: `N` strategic metadata keys in one hostile submission (the bound is 32)")
	fs.StringVar(&cfg.Against, "against", "", "side by side: a git `revision` of this repository to compare with; it is built into a scratch folder (git and go on the PATH, run from within the clone) and the workloads run for both binaries in alternating rounds, each on a fresh scratch database; the report gives each side's median of every figure and their ratio")
	fs.StringVar(&cfg.AgainstBinary, "against-binary", "", "side by side, as --against, with an opsq executable at `path` instead of a revision")
	fs.IntVar(&cfg.Rounds, "rounds", bench.RoundsDefault, "side by side: `N` rounds of each binary, in the order this, against, this, …; at least 3 with --against")
	fs.BoolVar(&cfg.JSON, "json", false, "print the results as JSON instead of a table")
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
            chunks handed out twice, and what PostgreSQL spent per chunk (CPU when the
            server is local, WAL bytes); with --river, River's burn-down of as many jobs
            first, on the same PostgreSQL, and the ratios
  latency   one consumer times --samples reserves (max 1, random) at each --backlogs size;
            with --waiting N, then again beside N chunks that wait (not_before a day ahead),
            and the ratio of the two
  distinct  --distinct-submissions single-chunk submissions (inserted with COPY, not through
            the API) over --distinct-values values of company_id; one consumer holds
            --distinct-held reservations, then times --samples reserves (max 1, prefer_distinct
            max 1, then random): percentiles, and how many gave a saturated value
  rss       instance 0 holds --rss-reservations reservations: its resident memory
  abuse     every hostile input of DESIGN.md §3 and §8 (bounds pushed past their limits,
            --abuse-stalls stalled uploads and results readers, --abuse-forged forged
            tokens, --abuse-methods invented methods, a reserve of max 10 000 over big
            chunks, the memory attacks of --abuse-memory-bytes and uploads trickling a byte
            every 10 s) for --abuse-duration while a burn-down goes on: peak RSS, oldest
            renewal, 5xx answers, burn-down chunks completed other than once, the answers
            to each hostile request (not in the default list: run it with --workload abuse)
  parked    --parked-consumers consumers long-poll, then as many chunks arrive: how long until
            all are served, and the instances' memory per parked consumer; then
            --parked-producers producers wait on their submissions while they are completed:
            how long after its last completion each is told
  failures  --consumers consumers burn down a --failure-chunks submission (on_failure continue,
            retry_backoff initial 0s), failing --failure-rate of their attempts (retry true)
            and completing the rest, and as many chunks without failures, --failure-rounds
            times, the order alternating: both rates, the median of their ratios, CPU per
            chunk, chunks failed for good, and chunks handed out while a reservation of them
            was live (not in the default list: run it with --workload failures)
  tenants   a backlog of --tenant-chunks object-storage chunks spread evenly over 100
            tenants (10M by default: a few minutes to insert), then --samples reserves
            (max 1, random) of a consumer of every tenant and of one limited to t17, in
            turn: the percentiles of each, the ratio, and chunks of another tenant handed
            to the limited one (needs --auth required; not in the default list: run it
            with --workload tenants)
  fairness  --instances instances (3 unless given), --consumers consumers spread over them,
            reserving one chunk at a time: weighted_fair 3:1:1 over three backlogged values
            for --fairness-duration, each --fairness-window's shares, then a fourth value
            arrives late: how soon it is served, and the next window's shares; rate_limit
            20/s burst 5 on three values at once for --fairness-rate-duration: each one's
            rate and most chunks in a second; a throttle of --fairness-throttle on one of
            two values: chunks of it handed out meanwhile, and how soon it resumes; then
            one consumer times --samples reserves of random, rate_limit and weighted_fair
            on a --fairness-latency-chunks backlog of which one value is 90 % (not in the
            default list: run it with --workload fairness)
  schedules --instances instances (3 unless given): one schedule @every 1s for
            --schedule-duration, instance 0 SIGKILLed at a third of it and instance 1
            SIGSTOPped for a quarter of it: runs expected, made, doubled, missed, and the
            creation delay of each run's submission; then --schedule-count schedules due
            every --schedule-idle-period, spread over it, on the idle cluster: the CPU of the
            instances and of PostgreSQL over --schedule-idle-duration, % of one core (not in
            the default list: run it with --workload schedules)
  dependencies
            --dependency-chains chains of 3 submissions, each after the previous: each
            child's start delay after its parent's complete; then --samples reserves on a
            --dependency-backlog backlog alone and again beside --dependency-waiting chunks
            waiting on a parent that never finishes: p50 ratio (not in the default list)
  citus     one PostgreSQL, a single-node Citus and a Citus coordinator with 2 workers, each
            local clusters started for the run (Citus installed in the local PostgreSQL):
            --consumers consumers burn down --citus-chunks chunks through --instances
            instances on each, --citus-rounds times, the order alternating: chunks/s and the
            ratio to one PostgreSQL's, chunks completed and handed out twice, PostgreSQL CPU
            and WAL per chunk on each node and summed, the coordinator's share of the CPU;
            then --samples reserves (max 1, random) over a --citus-backlog backlog on the
            coordinator and 2 workers (not in the default list: run it with --workload citus)

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
	if cfg.Workloads, err = parseWorkloads(*workloadList); err != nil {
		return cfg, usageError("--workload: %v", err)
	}
	instancesSet := false
	fs.Visit(func(f *flag.Flag) { instancesSet = instancesSet || f.Name == "instances" })
	if slices.Contains(cfg.Workloads, "fairness") && !instancesSet {
		cfg.Instances = bench.FairnessInstances
	}
	if slices.Contains(cfg.Workloads, "schedules") && !instancesSet {
		cfg.Instances = max(cfg.Instances, bench.ScheduleInstances)
	}
	if cfg.Backlogs, err = parseCounts(*backlogList); err != nil {
		return cfg, usageError("--backlogs: %v", err)
	}
	for _, text := range strings.Split(*strategyList, ";") {
		n, err := strategy.ParseAny(text)
		if err != nil {
			return cfg, usageError("--strategies: %v", err)
		}
		cfg.Strategies = append(cfg.Strategies, n)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError("%v", err)
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
		case !slices.Contains(bench.Workloads, w):
			return nil, fmt.Errorf("unknown workload %q: want %s", w, strings.Join(bench.Workloads, ", "))
		case slices.Contains(out, w):
			return nil, fmt.Errorf("workload %q given twice", w)
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no workload: want one or more of %s", strings.Join(bench.Workloads, ", "))
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

// waitingFlag is a flag value of a count that may be 0: "0", "20000", "20k" or "1M".
type waitingFlag int64

func (w *waitingFlag) String() string { return strconv.FormatInt(int64(*w), 10) }

func (w *waitingFlag) Set(s string) error {
	if strings.TrimSpace(s) == "0" {
		*w = 0
		return nil
	}
	return (*countFlag)(w).Set(s)
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
	cfg.Database = func(ctx context.Context) (string, error) {
		log, _ := newLogger("info", stderr) // devDatabase says which cluster it uses
		return databaseURL(ctx, cfg.databaseURL, cfg.devCluster, log)
	}
	return bench.Run(ctx, cfg.Config, stdout, stderr)
}
