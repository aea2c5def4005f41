package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"opsq/api/wire"
	"opsq/strategy"
)

// Workloads, in the order "opsq bench --help" lists them.
const (
	workloadIngest   = "ingest"
	workloadBurndown = "burndown"
	workloadLatency  = "latency"
	workloadDistinct = "distinct"
	workloadRSS      = "rss"
	workloadAbuse    = "abuse"
	workloadParked   = "parked"
	workloadFailures = "failures"
	workloadTenants  = "tenants"
	workloadFairness = "fairness"
)

// Workloads names the workloads, in the order "opsq bench --help" lists them.
var Workloads = []string{workloadIngest, workloadBurndown, workloadLatency, workloadDistinct, workloadRSS, workloadParked, workloadFailures, workloadTenants, workloadFairness, workloadSchedules, workloadDependencies, workloadAbuse, workloadCitus}

// Config is what "opsq bench" is asked to measure; its flags set it (cmd/opsq/bench.go).
type Config struct {
	// Database returns the URL of the PostgreSQL database through which the bench creates
	// and drops its scratch database. Required.
	Database func(ctx context.Context) (string, error)

	Instances int // opsq serve processes, 1 to 16. Defaults to 2.
	// Auth is the instances' OPSQ_AUTH: AuthRequired (the requests carry keys of each role,
	// keys.go) or AuthOff; empty is AuthRequired.
	Auth           string
	Workloads      []string        // in the order they run. Defaults to WorkloadsDefault.
	IngestChunks   int64           // ingest: chunks in the timed submission. Defaults to 1 000 000.
	BurndownChunks int64           // burndown: the backlog. Defaults to 300 000.
	Consumers      int             // burndown: concurrent consumers, 1 to 4096. Defaults to 64.
	Max            int             // burndown: chunks per reserve. Defaults to 10.
	Backlogs       []int64         // latency: backlog sizes. Defaults to 10 000 and 1 000 000.
	Strategies     []strategy.Node // latency: strategies timed at every backlog size. Defaults to random.
	Samples        int             // latency, distinct: timed reserves. Defaults to 2 000.
	// Waiting is how many chunks that wait (not_before a day ahead) the latency workload adds
	// beside each backlog before it times the backlog a second time; 0: none, the backlog is
	// timed once. Defaults to 0.
	Waiting int64
	// Vacuum runs VACUUM ANALYZE on opsq.chunks after each latency backlog is loaded, before
	// it is timed: the backlog as it is once autovacuum has caught up (its pages
	// all-visible, its statistics fresh), rather than right after its ingest. Defaults to
	// false.
	Vacuum          bool
	RSSReservations int64 // rss: reservations held. Defaults to 100 000.
	// RiverRate is River's burn-down rate in jobs/s, the burndown's target; 0: not compared.
	// River, when set, measures it instead. Defaults to 0.
	RiverRate float64
	// River runs River's burn-down (the Go module in RiverDir) before opsq's, on the same
	// PostgreSQL with as many jobs, and compares. Defaults to false.
	River bool
	// RiverDir is the directory of the River module; empty: the one of the source tree this
	// binary was built from, else ./cmd/opsq/bench/river. Defaults to empty.
	RiverDir string
	JSON     bool // print the report as JSON. Defaults to false.

	// Binary is the opsq executable whose "opsq serve" processes the bench starts; empty:
	// this one. The bench driver (clients, report) is always this one. Defaults to empty.
	Binary string
	// Against is a git revision of this repository to compare with, side by side: it is
	// built into a scratch folder, and the workloads run for both binaries in alternating
	// rounds (ab.go). Defaults to empty: no comparison.
	Against string
	// AgainstBinary is an opsq executable to compare with, as Against does without the
	// build. Defaults to empty.
	AgainstBinary string
	// Rounds is how many rounds each side runs when comparing; at least 3 with Against.
	// Defaults to 3.
	Rounds int

	DistinctSubmissions int64 // distinct: single-chunk submissions. Defaults to 200 000.
	DistinctValues      int64 // distinct: values of company_id. Defaults to 2 000.
	DistinctHeld        int   // distinct: reservations held, fewer than DistinctValues. Defaults to 500.

	AbuseDuration  time.Duration // abuse: how long the attacks last. Defaults to 60s.
	AbuseStalls    int           // abuse: stalled uploads, and stalled readers. Defaults to 100.
	AbuseForged    int           // abuse: forged tokens. Defaults to 10 000.
	AbuseMethods   int           // abuse: requests with invented methods. Defaults to 3 000.
	AbuseBigChunks int           // abuse: big chunks. Defaults to 10 000.
	AbuseKeys      int           // abuse: keys of the hostile submission. Defaults to 300 000.
	// AbuseMemoryBytes is the size of each big body of the memory attacks (abuse_memory.go);
	// the login forms, headers and list submissions scale with it. Defaults to 30 MiB, the
	// audit's.
	AbuseMemoryBytes int
	ParkedConsumers  int   // parked: parked consumers. Defaults to 10 000.
	ParkedProducers  int   // parked: waiting producers. Defaults to 10 000.
	FailureChunks    int64 // failures: chunks of each of the two submissions. Defaults to 100 000.
	// FailureRate is the share of its attempts that a consumer of the failures workload
	// fails (retry true), 0 to 1. Defaults to 0.01.
	FailureRate float64
	// FailureRounds is how many pairs of burn-downs (failing, clean) the failures workload
	// runs, the order alternating. Defaults to 3.
	FailureRounds int
	// TenantChunks is the tenants workload's backlog, spread evenly over 100 tenants.
	// Defaults to 10 000 000 (DESIGN.md §6's size; it takes minutes to insert).
	TenantChunks int64

	// FairnessDuration is how long the fairness workload's weighted_fair phase runs before
	// a late value arrives (then one window more). Defaults to 1m.
	FairnessDuration time.Duration
	// FairnessWindow is the window the weighted_fair shares are judged over, each on its
	// own. Defaults to 10s.
	FairnessWindow time.Duration
	// FairnessRateDuration is how long the rate_limit phase runs. Defaults to 30s.
	FairnessRateDuration time.Duration
	// FairnessThrottle is the throttle's "for" in the throttle phase. Defaults to 5s.
	FairnessThrottle time.Duration
	// FairnessLatencyChunks is the backlog the fairness workload times reserves on, with
	// random, rate_limit and weighted_fair. Defaults to 200 000.
	FairnessLatencyChunks int64

	ScheduleConfig   // schedules: schedules.go
	DependencyConfig // dependencies: dependencies.go
	CitusConfig      // citus: citus.go
}

// Defaults of Config; the sizes are those of DESIGN.md §6, except the large latency
// backlog (4 000 000 there), which takes minutes to insert. DESIGN.md names no number of
// values or of held reservations for PreferDistinct: 2 000 values of 100 submissions each,
// a quarter of them saturated.
const (
	InstancesDefault           = 2
	WorkloadsDefault           = "ingest,burndown,latency,distinct"
	IngestChunksDefault        = 1_000_000
	BurndownChunksDefault      = 300_000
	ConsumersDefault           = 64
	MaxDefault                 = 10
	BacklogsDefault            = "10000,1000000"
	SamplesDefault             = 2000
	RSSReservationsDefault     = 100_000
	DistinctSubmissionsDefault = 200_000
	DistinctValuesDefault      = 2_000
	DistinctHeldDefault        = 500
	AbuseDurationDefault       = 60 * time.Second
	AbuseStallsDefault         = 100
	AbuseForgedDefault         = 10_000
	AbuseMethodsDefault        = 3_000
	AbuseBigChunksDefault      = 10_000
	AbuseKeysDefault           = 300_000
	AbuseMemoryBytesDefault    = 30 << 20
	ParkedConsumersDefault     = 10_000  // DESIGN.md §6's size
	ParkedProducersDefault     = 10_000  // DESIGN.md §6's size
	FailureChunksDefault       = 100_000 // DESIGN.md §6's size
	FailureRateDefault         = 0.01    // DESIGN.md §6's rate
	FailureRoundsDefault       = 3
	TenantChunksDefault        = 10_000_000 // DESIGN.md §6's size
	// FairnessInstances is how many instances --workload fairness starts when --instances
	// is not given: DESIGN.md §6's.
	FairnessInstances            = 3
	FairnessDurationDefault      = time.Minute // DESIGN.md §6's
	FairnessWindowDefault        = 10 * time.Second
	FairnessRateDurationDefault  = 30 * time.Second
	FairnessThrottleDefault      = 5 * time.Second
	FairnessLatencyChunksDefault = 200_000
	RoundsDefault                = 3
)

// latencyWarmup is how many reserves the latency workload makes, untimed, before it
// measures: they open the connection and fill the caches.
const latencyWarmup = 20

// Validate checks cfg; its messages name the flag and the allowed range.
func (cfg Config) Validate() error {
	switch {
	case cfg.Instances < 1 || cfg.Instances > 16:
		return fmt.Errorf("--instances %d: want 1 to 16", cfg.Instances)
	case cfg.Auth != "" && cfg.Auth != AuthRequired && cfg.Auth != AuthOff:
		return fmt.Errorf("--auth %q: want %s or %s", cfg.Auth, AuthRequired, AuthOff)
	case cfg.IngestChunks < 1:
		return fmt.Errorf("--ingest-chunks %d: want 1 or more", cfg.IngestChunks)
	case cfg.BurndownChunks < 1:
		return fmt.Errorf("--burndown-chunks %d: want 1 or more", cfg.BurndownChunks)
	case cfg.Consumers < 1 || cfg.Consumers > 4096:
		return fmt.Errorf("--consumers %d: want 1 to 4096", cfg.Consumers)
	case cfg.Max < 1 || cfg.Max > wire.MaxReserveChunks:
		return fmt.Errorf("--max %d: want 1 to %d", cfg.Max, wire.MaxReserveChunks)
	case cfg.Samples < 1:
		return fmt.Errorf("--samples %d: want 1 or more", cfg.Samples)
	case cfg.DistinctValues > cfg.DistinctSubmissions:
		return fmt.Errorf("--distinct-values %d: want at most --distinct-submissions (%d)", cfg.DistinctValues, cfg.DistinctSubmissions)
	case cfg.DistinctHeld < 0 || int64(cfg.DistinctHeld) >= cfg.DistinctValues:
		return fmt.Errorf("--distinct-held %d: want 0 to %d, fewer than --distinct-values, so that unsaturated values remain",
			cfg.DistinctHeld, cfg.DistinctValues-1)
	case cfg.ParkedConsumers < 1 || cfg.ParkedProducers < 1:
		return fmt.Errorf("--parked-consumers %d, --parked-producers %d: want 1 or more", cfg.ParkedConsumers, cfg.ParkedProducers)
	case cfg.RSSReservations < 1:
		return fmt.Errorf("--rss-reservations %d: want 1 or more", cfg.RSSReservations)
	case cfg.FailureChunks < 1:
		return fmt.Errorf("--failure-chunks %d: want 1 or more", cfg.FailureChunks)
	case cfg.FailureRounds < 1 || cfg.FailureRounds > 20:
		return fmt.Errorf("--failure-rounds %d: want 1 to 20", cfg.FailureRounds)
	case !(cfg.FailureRate >= 0 && cfg.FailureRate <= 1):
		return fmt.Errorf("--failure-rate %g: want 0 to 1", cfg.FailureRate)
	case cfg.Waiting < 0:
		return fmt.Errorf("--waiting %d: want 0 or more", cfg.Waiting)
	case cfg.RiverRate < 0:
		return fmt.Errorf("--river-rate %g: want 0 (not compared) or more", cfg.RiverRate)
	case cfg.AbuseDuration < time.Second || cfg.AbuseDuration > time.Hour:
		return fmt.Errorf("--abuse-duration %s: want 1s to 1h", cfg.AbuseDuration)
	case cfg.AbuseStalls < 0 || cfg.AbuseStalls > 10_000:
		return fmt.Errorf("--abuse-stalls %d: want 0 to 10000", cfg.AbuseStalls)
	case cfg.AbuseForged < 0 || cfg.AbuseForged > 10_000_000:
		return fmt.Errorf("--abuse-forged %d: want 0 to 10000000", cfg.AbuseForged)
	case cfg.AbuseMethods < 0 || cfg.AbuseMethods > 1_000_000:
		return fmt.Errorf("--abuse-methods %d: want 0 to 1000000", cfg.AbuseMethods)
	case cfg.AbuseBigChunks < 1 || cfg.AbuseBigChunks > 100_000:
		return fmt.Errorf("--abuse-big-chunks %d: want 1 to 100000", cfg.AbuseBigChunks)
	case cfg.AbuseMemoryBytes < 64<<10 || cfg.AbuseMemoryBytes > 31<<20:
		return fmt.Errorf("--abuse-memory-bytes %d: want 65536 to 32505856 (31 MiB, within the 32 MiB body bound)", cfg.AbuseMemoryBytes)
	case cfg.AbuseKeys < 33 || cfg.AbuseKeys > 10_000_000:
		return fmt.Errorf("--abuse-keys %d: want 33 (one past the bound) to 10000000", cfg.AbuseKeys)
	case cfg.FairnessWindow < 100*time.Millisecond || cfg.FairnessWindow > 10*time.Minute:
		return fmt.Errorf("--fairness-window %s: want 100ms to 10m", cfg.FairnessWindow)
	case cfg.FairnessDuration < cfg.FairnessWindow || cfg.FairnessDuration > time.Hour:
		return fmt.Errorf("--fairness-duration %s: want --fairness-window (%s) to 1h", cfg.FairnessDuration, cfg.FairnessWindow)
	case cfg.FairnessRateDuration < time.Second || cfg.FairnessRateDuration > time.Hour:
		return fmt.Errorf("--fairness-rate-duration %s: want 1s to 1h", cfg.FairnessRateDuration)
	case cfg.FairnessThrottle < time.Second || cfg.FairnessThrottle > time.Hour:
		return fmt.Errorf("--fairness-throttle %s: want 1s to 1h (POST /v1/throttle's bounds)", cfg.FairnessThrottle)
	case cfg.Against != "" && cfg.AgainstBinary != "":
		return fmt.Errorf("--against %s, --against-binary %s: give one of them", cfg.Against, cfg.AgainstBinary)
	case cfg.Against != "" && cfg.Rounds < 3:
		return fmt.Errorf("--rounds %d: want at least 3 with --against (a median of fewer says little)", cfg.Rounds)
	case (cfg.Against != "" || cfg.AgainstBinary != "") && (cfg.Rounds < 1 || cfg.Rounds > 50):
		return fmt.Errorf("--rounds %d: want 1 to 50", cfg.Rounds)
	case len(cfg.Workloads) == 0:
		return fmt.Errorf("--workload: no workload: want one or more of %v", Workloads)
	case len(cfg.Strategies) == 0 && slices.Contains(cfg.Workloads, workloadLatency):
		return fmt.Errorf("--strategies: want one or more")
	}
	if err := errors.Join(cfg.ScheduleConfig.validate(cfg), cfg.DependencyConfig.validate(cfg), cfg.validateCitus()); err != nil {
		return err
	}
	timings := 1 // each backlog is timed once, and again beside the waiting chunks
	if cfg.Waiting > 0 {
		timings = 2
	}
	if need := int64(timings * len(cfg.Strategies) * (cfg.Samples + latencyWarmup)); slices.Contains(cfg.Workloads, workloadLatency) && slices.Min(cfg.Backlogs) <= need {
		return fmt.Errorf("--backlogs %s: each backlog must be larger than the %d reserves that consume it (%d timings × %d strategies × (--samples %d + %d to warm up))",
			joinCounts(cfg.Backlogs), need, timings, len(cfg.Strategies), cfg.Samples, latencyWarmup)
	}
	if need := int64(cfg.Samples + latencyWarmup); slices.Contains(cfg.Workloads, workloadTenants) && cfg.TenantChunks/tenantCount <= need {
		return fmt.Errorf("--tenant-chunks %d: each of the %d tenants must have more chunks than the %d reserves that consume them (--samples %d + %d to warm up): want at least %d",
			cfg.TenantChunks, tenantCount, need, cfg.Samples, latencyWarmup, (need+1)*tenantCount)
	}
	if slices.Contains(cfg.Workloads, workloadTenants) && cfg.Auth == AuthOff {
		return fmt.Errorf("--workload %s: needs --auth %s: a consumer is limited to a tenant by its key", workloadTenants, AuthRequired)
	}
	if need := int64(3*(cfg.Samples+latencyWarmup)) * 20; slices.Contains(cfg.Workloads, workloadFairness) && cfg.FairnessLatencyChunks < need {
		return fmt.Errorf("--fairness-latency-chunks %d: want at least %d, 20 times the reserves of the 3 strategies timed on it (--samples %d + %d to warm up, each): its chunks without the key, a twentieth of it, must outlast them",
			cfg.FairnessLatencyChunks, need, cfg.Samples, latencyWarmup)
	}
	if need := int64(cfg.DistinctHeld + cfg.Samples + latencyWarmup); slices.Contains(cfg.Workloads, workloadDistinct) && cfg.DistinctSubmissions <= need {
		return fmt.Errorf("--distinct-submissions %d: must be larger than the %d reserves that consume them (--distinct-held %d + --samples %d + %d to warm up)",
			cfg.DistinctSubmissions, need, cfg.DistinctHeld, cfg.Samples, latencyWarmup)
	}
	return nil
}

// joinCounts writes counts as a comma-separated list: "1000,4000000".
func joinCounts(counts []int64) string {
	s := ""
	for i, c := range counts {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(c)
	}
	return s
}
