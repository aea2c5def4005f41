package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/api/wire"
	"opsq/cmd/opsq/clustertest"
	"opsq/cmd/opsq/progress"
	"opsq/sql/pglocal"
)

// The citus workload (DESIGN.md §6, "Citus, a coordinator and 2 workers"): the same
// burn-down on one PostgreSQL, on a single-node Citus (the coordinator alone, opsq's tables
// distributed on it) and on a coordinator and 2 workers, each its own local cluster(s)
// started for the run on free ports and migrated by opsq migrate up. For each: chunks/s and the ratio to one
// PostgreSQL's, every chunk completed once, what PostgreSQL spent per chunk on each node
// (the CPU of the node's postmaster and all its processes, /proc; its WAL,
// pg_current_wal_insert_lsn) and summed, and the coordinator's share. Then, on the
// coordinator and 2 workers, reserve p50/p99 (max 1, random) over a --citus-backlog backlog
// spread over the workers. The bench's own scratch database (--database-url) stays idle.

const workloadCitus = "citus"

// CitusConfig is the citus workload's part of Config.
type CitusConfig struct {
	CitusChunks  int64 // citus: chunks burnt down on each setup. Defaults to 100 000 (DESIGN.md §6).
	CitusBacklog int64 // citus: the backlog the reserves are timed over. Defaults to 10 000 000 (DESIGN.md §6).
	// CitusRounds is how many rounds of the three burn-downs run, the order alternating
	// (one PostgreSQL first, then last); the rates reported are the medians. Defaults to 1.
	CitusRounds int
}

// Defaults of CitusConfig, and the targets of DESIGN.md §6's Citus line.
const (
	CitusChunksDefault  = 100_000
	CitusBacklogDefault = 10_000_000
	CitusRoundsDefault  = 1

	citusRatioTarget         = 0.5       // coordinator + 2 workers over one PostgreSQL, at least
	citusCoordinatorShareMax = 100.0 / 3 // % of the nodes' PostgreSQL CPU, at most
	citusReserveP50TargetMs  = 2
	citusWorkerCount         = 2
)

// validateCitus checks the citus workload's flags, when it runs.
func (cfg Config) validateCitus() error {
	if !slices.Contains(cfg.Workloads, workloadCitus) {
		return nil
	}
	switch need := int64(cfg.Samples + latencyWarmup); {
	case cfg.CitusChunks < 1:
		return fmt.Errorf("--citus-chunks %d: want 1 or more", cfg.CitusChunks)
	case cfg.CitusRounds < 1 || cfg.CitusRounds > 20:
		return fmt.Errorf("--citus-rounds %d: want 1 to 20", cfg.CitusRounds)
	case cfg.CitusBacklog <= need:
		return fmt.Errorf("--citus-backlog %d: must be larger than the %d reserves that consume it (--samples %d + %d to warm up)",
			cfg.CitusBacklog, need, cfg.Samples, latencyWarmup)
	}
	return nil
}

// citusSetup is one of the three databases the workload burns down on.
type citusSetup struct {
	key     string // in the rows' keys
	name    string // for a person
	citus   bool
	workers int
}

var citusSetups = []citusSetup{
	{key: "postgres", name: "one PostgreSQL"},
	{key: "single", name: "single-node Citus", citus: true},
	{key: "workers", name: "Citus coordinator + 2 workers", citus: true, workers: citusWorkerCount},
}

// nodeNames names the nodes of a setup: the coordinator (or the one server) first.
func (s citusSetup) nodeNames() []string {
	if !s.citus {
		return []string{"server"}
	}
	names := []string{"coordinator"}
	for i := range s.workers {
		names = append(names, fmt.Sprintf("worker%d", i+1))
	}
	return names
}

// citusTotals is what the rounds of one setup measured.
type citusTotals struct {
	rates   []float64 // chunks/s, one per round
	spent   []pgSpent // per node, summed over the rounds
	chunks  int64     // submitted, over the rounds
	done    int64     // completed (answered "completed" for a chunk of the burn-down)
	twice   int64     // handed out while a reservation of them was live
	never   int64
	ledger  int64  // completions in the ledger (opsq.completed_batches)
	dups    int64  // of them, completions of a chunk completed already
	cpuNote string // why the CPU was not measured, if it was not
}

// citus runs the workload.
func (r *benchRun) citus(ctx context.Context) error {
	if err := citusInstalled(); err != nil {
		return err
	}
	totals := make([]citusTotals, len(citusSetups))
	var lat *latencyStats
	var placed []int64
	var ingestTook time.Duration
	for round := range r.cfg.CitusRounds {
		for _, i := range citusOrder(round) {
			s := citusSetups[i]
			timeLatency := s.workers > 0 && round == r.cfg.CitusRounds-1
			res, err := r.citusRound(ctx, s, round, timeLatency)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", s.name, round+1, err)
			}
			t := &totals[i]
			t.rates = append(t.rates, res.rate)
			if t.spent == nil {
				t.spent = make([]pgSpent, len(res.spent))
			}
			for j, sp := range res.spent {
				t.spent[j].cpu += sp.cpu
				t.spent[j].wal += sp.wal
			}
			t.chunks += r.cfg.CitusChunks
			t.done += res.done
			t.twice += res.twice
			t.never += res.never
			t.ledger += res.ledger
			t.dups += res.dups
			t.cpuNote = res.cpuNote
			if res.latency != nil {
				lat, ingestTook, placed = res.latency, res.ingestTook, res.placed
			}
		}
	}
	r.report.add(citusRows(totals, r.cfg.CitusRounds)...)
	if lat != nil {
		size := r.cfg.CitusBacklog
		at := "coordinator + 2 workers, backlog " + progress.GroupDigits(size) + ", "
		r.report.add(
			measured("citus.workers.backlog_ingest_seconds", at+"one NDJSON submission", ingestTook.Seconds(), unitSeconds).note("no target"),
			measured("citus.workers.reserve_p50", at+"reserve p50 (max 1, random)", inMillis(lat.P50), unitMillis).want("<=", citusReserveP50TargetMs),
			measured("citus.workers.reserve_p99", at+"reserve p99 (max 1, random)", inMillis(lat.P99), unitMillis).note("%d samples; no target", lat.N),
		)
		for i, name := range citusSetups[2].nodeNames() {
			row := measured("citus.workers.backlog_chunks."+name, at+"its chunks on the "+name, float64(placed[i]), unitCount).
				note("counted on each placement of opsq.chunks (run_command_on_placements)")
			if i == 0 {
				row = row.want("==", 0)
			}
			r.report.add(row)
		}
	}
	return nil
}

// citusOrder returns the order in which round runs the setups, indexes of citusSetups:
// one PostgreSQL first in the even rounds, last in the odd ones, so that whatever the
// machine does over the run weighs on each setup alike.
func citusOrder(round int) []int {
	order := make([]int, len(citusSetups))
	for i := range order {
		order[i] = i
	}
	if round%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// citusRoundResult is what one burn-down on one setup measured.
type citusRoundResult struct {
	rate               float64
	spent              []pgSpent // per node
	done, twice, never int64
	ledger, dups       int64
	cpuNote            string
	latency            *latencyStats // the backlog's reserves, when timed
	placed             []int64       // the backlog's chunks on each node, when timed
	ingestTook         time.Duration
}

// citusRound starts setup s's clusters and instances, burns down --citus-chunks chunks
// on them, times the reserves over the backlog if timeLatency, and stops it all.
func (r *benchRun) citusRound(ctx context.Context, s citusSetup, round int, timeLatency bool) (res citusRoundResult, err error) {
	label := fmt.Sprintf("citus %s, round %d", s.key, round+1)
	r.line.Show(label + ": starting the clusters")
	nodes, err := startCitusNodes(ctx, s)
	if nodes != nil {
		defer nodes.stop(r)
	}
	if err != nil {
		return res, err
	}
	dbName := fmt.Sprintf("opsq_bench_citus_%d", os.Getpid())
	if err := nodes.createDB(ctx, dbName, s); err != nil {
		return res, err
	}
	r.line.Show(label + ": opsq migrate up")
	migrateTook, err := migrateUp(ctx, r.cfg, nodes.clusters[0].URL(dbName))
	if err != nil {
		return res, err
	}
	r.say("%s: opsq migrate up took %s", label, progress.Duration(migrateTook))
	r.line.Show(label + ": starting the instances")
	e := &benchEnv{adminURL: nodes.clusters[0].URL("postgres"), dbName: dbName, stderr: r.env.stderr}
	for _, c := range nodes.clusters[1:] { // each instance homed on a worker, as docs/citus.md says to run them
		e.homes = append(e.homes, fmt.Sprintf("127.0.0.1:%d", c.Port))
	}
	failed := true
	defer func() { e.close(failed) }()
	if err := e.startInstances(ctx, r.cfg); err != nil {
		return res, err
	}
	costs := []*pgCost{e.cost}
	for _, c := range nodes.clusters[1:] {
		pc, err := pgxpool.New(ctx, c.URL(dbName))
		if err != nil {
			return res, fmt.Errorf("connecting to a worker: %w", err)
		}
		defer pc.Close()
		cost, err := newPGCost(ctx, pc)
		if err != nil {
			return res, err
		}
		costs = append(costs, cost)
	}
	for _, c := range costs {
		if !c.cpuMeasured() {
			res.cpuNote = c.notLocal
		}
	}
	sub := &benchRun{cfg: r.cfg, env: e, line: r.line, report: benchReport{}}
	defer func() { r.report.Broken = append(r.report.Broken, sub.report.Broken...) }()

	n := r.cfg.CitusChunks
	created, _, err := sub.submit(ctx, e.clients[0], n, label+" backlog")
	if err != nil {
		return res, err
	}
	defer sub.discard(ctx, created.ID)
	before := make([]pgSample, len(costs))
	for i, c := range costs {
		if before[i], err = c.sample(ctx); err != nil {
			return res, err
		}
	}
	b, err := sub.burnDown(ctx, label, created.ID, n, 0)
	if err != nil {
		return res, err
	}
	for i, c := range costs {
		spent, err := c.since(ctx, before[i])
		if err != nil {
			return res, err
		}
		res.spent = append(res.spent, spent)
	}
	if _, err := sub.checkBurnDown(ctx, b); err != nil {
		return res, err
	}
	if res.ledger, res.dups, err = countLedger(ctx, e.pool, created.ID); err != nil {
		return res, err
	}
	if res.ledger != n || res.dups != 0 {
		sub.broke("%s: the ledger holds %d completions, %d of them of a chunk completed already; want %d, none", label, res.ledger, res.dups, n)
	}
	took := b.end.Sub(b.start)
	res.rate = perSecond(n, took)
	res.done = b.done.Load()
	res.twice, res.never = b.counts()
	if res.done != n {
		sub.broke("%s: %d chunks answered completed, of %d submitted", label, res.done, n)
	}
	r.say("%s (%s): %s chunks in %s (%s chunks/s), %d handed out twice", label, s.name, progress.GroupDigits(n), progress.Duration(took),
		progress.GroupDigits(progress.RoundSignificant(res.rate, 3)), res.twice)

	if timeLatency {
		size := r.cfg.CitusBacklog
		blabel := fmt.Sprintf("%s: backlog %s", label, progress.GroupDigits(size))
		// Not cancelled: its database goes with the clusters.
		if _, res.ingestTook, err = sub.submit(ctx, e.clients[0], size, blabel); err != nil {
			return res, err
		}
		if res.placed, err = placedChunks(ctx, e.pool, nodes); err != nil {
			return res, err
		}
		req := wire.ReserveRequest{Max: 1, Strategy: randomStrategy, Lease: "5m", Consumer: "bench-citus-latency"}
		reserves, _, err := sub.timeReserves(ctx, e.clients[0], req, r.cfg.Samples, blabel+", random", nil)
		if err != nil {
			return res, err
		}
		st := summarize(reserves)
		res.latency = &st
		r.say("%s, random: reserve p50 %.2f ms, p99 %.2f ms (%d samples)", blabel, inMillis(st.P50), inMillis(st.P99), st.N)
	}
	failed = len(sub.report.Broken) > 0
	return res, nil
}

// migrateUp runs "opsq migrate up" on dbURL, as an operator would before starting the
// instances (the first instance then finds nothing to do): on a Citus coordinator, migration
// 00017 distributes opsq's tables.
func migrateUp(ctx context.Context, cfg Config, dbURL string) (time.Duration, error) {
	exe, err := clustertest.Self()
	if err != nil {
		return 0, err
	}
	if cfg.Binary != "" {
		exe = clustertest.Binary{Path: cfg.Binary}
	}
	ctx, cancel := context.WithTimeout(ctx, benchReadyTimeout)
	defer cancel()
	start := time.Now()
	cmd := exe.Command([]string{"migrate", "up", "--log-level", "warn"}, "OPSQ_DATABASE_URL="+dbURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("opsq migrate up: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() }) // Ctrl-C, or too long
	err = cmd.Wait()
	stop()
	if err != nil {
		return 0, fmt.Errorf("opsq migrate up (%s): %w\n%s", progress.Duration(time.Since(start)), errors.Join(err, ctx.Err()), out.String())
	}
	return time.Since(start), nil
}

// placedChunks counts the rows of opsq.chunks on each of the nodes, through the
// coordinator: each placement of the table counted where it is.
func placedChunks(ctx context.Context, pool *pgxpool.Pool, nodes *citusNodes) ([]int64, error) {
	rows, err := pool.Query(ctx, `SELECT nodeport, sum(result::bigint)::bigint
FROM run_command_on_placements('opsq.chunks', 'SELECT count(*) FROM %s') WHERE success GROUP BY nodeport`)
	if err != nil {
		return nil, fmt.Errorf("counting the chunks on each node: %w", err)
	}
	byPort := map[int]int64{}
	for rows.Next() {
		var port int
		var n int64
		if err := rows.Scan(&port, &n); err != nil {
			return nil, err
		}
		byPort[port] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting the chunks on each node: %w", err)
	}
	placed := make([]int64, len(nodes.clusters))
	for i, c := range nodes.clusters {
		placed[i] = byPort[c.Port]
	}
	return placed, nil
}

// countLedger counts the completions of submission id that the ledger holds (one row per
// chunk of opsq.completed_batches' arrays) and, of them, those of a chunk completed
// already. On Citus it is a router query, completed_batches being distributed by
// submission.
func countLedger(ctx context.Context, pool *pgxpool.Pool, id string) (completions, dups int64, err error) {
	err = pool.QueryRow(ctx, `SELECT count(*), count(*) - count(DISTINCT c.chunk_index)
FROM opsq.completed_batches b, unnest(b.chunk_indexes) AS c(chunk_index)
WHERE b.submission_id = $1::bigint`, id).Scan(&completions, &dups)
	if err != nil {
		return 0, 0, fmt.Errorf("counting the ledger: %w", err)
	}
	return completions, dups, nil
}

// nodeAccount is what the nodes of a setup spent, summed, and each node's share of it.
type nodeAccount struct {
	total              pgSpent
	cpuShare, walShare []float64 // per node, in %; 0 when the total is 0
}

// accountNodes sums what the nodes spent and gives each node's share; node 0 is the
// coordinator.
func accountNodes(nodes []pgSpent) nodeAccount {
	var a nodeAccount
	for _, s := range nodes {
		a.total.cpu += s.cpu
		a.total.wal += s.wal
	}
	for _, s := range nodes {
		cpu, wal := 0.0, 0.0
		if a.total.cpu > 0 {
			cpu = 100 * float64(s.cpu) / float64(a.total.cpu)
		}
		if a.total.wal > 0 {
			wal = 100 * float64(s.wal) / float64(a.total.wal)
		}
		a.cpuShare, a.walShare = append(a.cpuShare, cpu), append(a.walShare, wal)
	}
	return a
}

// citusRows are the report's rows of the setups' burn-downs, totals[i] of citusSetups[i].
func citusRows(totals []citusTotals, rounds int) []benchRow {
	var rows []benchRow
	median := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		s := slices.Sorted(slices.Values(v))
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	pgRate := median(totals[0].rates)
	for i, s := range citusSetups {
		t := totals[i]
		p := "citus." + s.key + "."
		rate := median(t.rates)
		rateRow := measured(p+"rate", s.name+": burn-down", rate, unitRate)
		if rounds > 1 {
			rateRow = rateRow.note("the median of %d rounds", rounds)
		}
		rows = append(rows, rateRow)
		if i > 0 {
			ratio := 0.0
			if pgRate > 0 {
				ratio = rate / pgRate
			}
			row := measured(p+"rate_ratio", s.name+": rate over one PostgreSQL's", ratio, unitRatio)
			if s.workers > 0 {
				row = row.want(">=", citusRatioTarget)
			} else {
				row = row.note("no target")
			}
			rows = append(rows, row)
		}
		rows = append(rows,
			measured(p+"completed", s.name+": chunks completed", float64(t.done), unitCount).want("==", float64(t.chunks)).
				note("answered completed, of %s submitted", progress.GroupDigits(t.chunks)),
			measured(p+"ledger_completed", s.name+": completions in the ledger", float64(t.ledger), unitCount).want("==", float64(t.chunks)).
				note("opsq.completed_batches, counted by the bench"),
			measured(p+"ledger_duplicates", s.name+": chunks completed twice in the ledger", float64(t.dups), unitCount).want("==", 0),
			measured(p+"handed_out_twice", s.name+": chunks handed out twice", float64(t.twice), unitCount).want("==", 0),
			measured(p+"never_handed_out", s.name+": chunks never handed out", float64(t.never), unitCount).want("==", 0))
		rows = append(rows, nodeCostRows(p, s, t.spent, t.chunks, t.cpuNote)...)
	}
	return rows
}

// nodeCostRows are the rows of what each node of setup s spent per chunk over n chunks,
// summed, and the coordinator's share (a target on a coordinator with workers).
func nodeCostRows(p string, s citusSetup, spent []pgSpent, n int64, cpuNote string) []benchRow {
	a := accountNodes(spent)
	names := s.nodeNames()
	var rows []benchRow
	cpuRow := func(key, measure string, sp pgSpent, note string) benchRow {
		if cpuNote != "" {
			return unavailable(key, measure, unitMicros, cpuNote)
		}
		cpu, _ := sp.perItem(n)
		return measured(key, measure, cpu, unitMicros).note("%s", note)
	}
	for i, sp := range spent {
		name := names[min(i, len(names)-1)]
		_, wal := sp.perItem(n)
		rows = append(rows,
			cpuRow(p+"pg_cpu_per_chunk."+name, s.name+": PostgreSQL CPU per chunk, "+name, sp,
				fmt.Sprintf("%s of CPU of the node's processes, %.1f%% of the setup's", progress.Duration(sp.cpu), a.cpuShare[i])),
			measured(p+"wal_per_chunk."+name, s.name+": WAL bytes per chunk, "+name, wal, unitBytes).
				note("%s of WAL, %.1f%% of the setup's", progress.Bytes(sp.wal), a.walShare[i]))
	}
	if len(spent) < 2 {
		return rows
	}
	_, wal := a.total.perItem(n)
	rows = append(rows,
		cpuRow(p+"pg_cpu_per_chunk", s.name+": PostgreSQL CPU per chunk, all nodes", a.total, "the nodes' sum"),
		measured(p+"wal_per_chunk", s.name+": WAL bytes per chunk, all nodes", wal, unitBytes).note("the nodes' sum"))
	if cpuNote != "" {
		return append(rows, unavailable(p+"coordinator_cpu_share", s.name+": coordinator's share of the PostgreSQL CPU", unitPercent, cpuNote))
	}
	return append(rows, measured(p+"coordinator_cpu_share", s.name+": coordinator's share of the PostgreSQL CPU", a.cpuShare[0], unitPercent).
		want("<=", citusCoordinatorShareMax))
}

// citusInstalled says what to do when the local PostgreSQL has no citus library.
func citusInstalled() error {
	bin, err := pglocal.BinDir()
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres")); err == nil {
		bin = filepath.Dir(real)
	}
	lib := filepath.Join(filepath.Dir(bin), "lib", "citus.so")
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("the citus workload needs Citus in the local PostgreSQL server, and %s is missing: "+
			"install Citus 13 into it (as root: ../shared/citus/build.sh from the project's root, about 2 minutes)", lib)
	}
	return nil
}

// citusNodes are the local clusters of one setup, in one temporary directory: the
// coordinator (or the one PostgreSQL) first.
type citusNodes struct {
	dir      string
	clusters []*pglocal.Cluster
}

// startCitusNodes starts setup s's clusters. The returned nodes, even with an error, must
// be stopped.
func startCitusNodes(ctx context.Context, s citusSetup) (*citusNodes, error) {
	dir, err := os.MkdirTemp("", "opsq-bench-citus-")
	if err != nil {
		return nil, fmt.Errorf("making a directory for the clusters: %w", err)
	}
	n := &citusNodes{dir: dir}
	for i := 0; i <= s.workers; i++ {
		// The same server settings on every setup: those of the development cluster
		// (durable), and what Citus needs.
		settings := map[string]string{"max_wal_size": "4GB", "shared_buffers": "256MB", "max_connections": "300", "jit": "off"}
		if s.citus {
			settings["shared_preload_libraries"] = "citus"
			settings["citus.node_conninfo"] = "sslmode=disable" // between nodes on loopback
		}
		c := &pglocal.Cluster{Dir: filepath.Join(dir, fmt.Sprintf("node%d", i)), Durable: true, Settings: settings}
		n.clusters = append(n.clusters, c)
		if err := c.Init(ctx); err != nil {
			return n, err
		}
		if err := c.Start(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

// stop stops the clusters and removes their directory.
func (n *citusNodes) stop(r *benchRun) {
	ctx, cancel := context.WithTimeout(context.Background(), benchDatabaseTimeout)
	defer cancel()
	var errs []error
	for _, c := range n.clusters {
		errs = append(errs, c.Stop(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(r.env.stderr, "stopping the citus workload's clusters in %s: %v\n", n.dir, err)
		return
	}
	os.RemoveAll(n.dir)
}

// createDB creates database name on every node; on Citus, with the extension, and the
// coordinator (with its workers, or holding the shards itself) registered.
func (n *citusNodes) createDB(ctx context.Context, name string, s citusSetup) error {
	ctx, cancel := context.WithTimeout(ctx, benchDatabaseTimeout)
	defer cancel()
	ident := pgx.Identifier{name}.Sanitize()
	for i, c := range n.clusters {
		if err := execOn(ctx, c.URL("postgres"), "CREATE DATABASE "+ident); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
	}
	if !s.citus {
		return nil
	}
	for i, c := range n.clusters[1:] {
		if err := execOn(ctx, c.URL(name), "CREATE EXTENSION citus"); err != nil {
			return fmt.Errorf("worker %d: %w", i+1, err)
		}
	}
	coord := n.clusters[0]
	stmts := []string{"CREATE EXTENSION citus", fmt.Sprintf("SELECT citus_set_coordinator_host('127.0.0.1', %d)", coord.Port)}
	if s.workers == 0 {
		stmts = append(stmts, fmt.Sprintf("SELECT citus_set_node_property('127.0.0.1', %d, 'shouldhaveshards', true)", coord.Port))
	}
	for _, c := range n.clusters[1:] {
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node('127.0.0.1', %d)", c.Port))
	}
	if err := execOn(ctx, coord.URL(name), stmts...); err != nil {
		return fmt.Errorf("coordinator: %w", err)
	}
	return nil
}

// execOn runs stmts, in order, in database dbURL.
func execOn(ctx context.Context, dbURL string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}
