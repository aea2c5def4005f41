package api

import (
	"cmp"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"opsq/queuer"
)

// metrics are the Prometheus metrics of one API server, on GET /metrics
// (docs/operations.md, "Metrics and alerts"). Each server has its own registry, so that
// several servers in one process (the tests) do not collide.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.HistogramVec
}

// instanceMetrics are read from the queuer at each scrape: counters (monotonic since the
// instance started) and gauges.
var instanceMetrics = []struct {
	name, help string
	counter    bool
	value      func(queuer.Metrics) float64
}{
	{"opsq_reservations", "Live reservations held by this instance.", false, func(m queuer.Metrics) float64 { return float64(m.Reservations) }},
	{"opsq_shards_owned", "Shards this instance claims (reservable or draining).", false, func(m queuer.Metrics) float64 { return float64(m.ShardsOwned) }},
	{"opsq_shards_reservable", "Shards this instance reserves from now.", false, func(m queuer.Metrics) float64 { return float64(m.ShardsReservable) }},
	{"opsq_children_waiting", "Submissions waiting on their parents (after), as this instance last counted them: every 5 s while any wait.", false, func(m queuer.Metrics) float64 { return float64(m.ChildrenWaiting) }},
	{"opsq_waiters", "Requests waiting on this instance now: reserves with a wait and status waits (at most OPSQ_MAX_WAITERS).", false, func(m queuer.Metrics) float64 { return float64(m.Waiting) }},
	{"opsq_reserved_total", "Chunks reserved from this instance's shards.", true, func(m queuer.Metrics) float64 { return float64(m.Reserved) }},
	{"opsq_completed_total", "Chunks completed through this instance.", true, func(m queuer.Metrics) float64 { return float64(m.Completed) }},
	{"opsq_failed_attempts_total", "Failed attempts reported through this instance, retried or final.", true, func(m queuer.Metrics) float64 { return float64(m.FailedAttempts) }},
	{"opsq_expired_total", "Reservations of this instance whose lease ran out.", true, func(m queuer.Metrics) float64 { return float64(m.Expired) }},
	{"opsq_chunks_ingested_total", "Chunks inserted through this instance.", true, func(m queuer.Metrics) float64 { return float64(m.ChunksIngested) }},
	{"opsq_claims_acquired_total", "Shards this instance acquired; each acquisition is a change of generation.", true, func(m queuer.Metrics) float64 { return float64(m.Claims.Acquired) }},
	{"opsq_claims_lost_total", "Shards a renewal of this instance found taken by another instance or an operator.", true, func(m queuer.Metrics) float64 { return float64(m.Claims.Lost) }},
	{"opsq_claims_released_total", "Shards this instance released (drained, or at stop).", true, func(m queuer.Metrics) float64 { return float64(m.Claims.Released) }},
	{"opsq_claims_renew_failures_total", "Claims cycles of this instance whose renewal did not succeed: the renewal failed, or the heartbeat before it (database unreachable).", true, func(m queuer.Metrics) float64 { return float64(m.Claims.RenewFailures) }},
	{"opsq_claims_cycle_failures_total", "Claims cycles of this instance that failed at any step (heartbeat, renewal, release, acquire).", true, func(m queuer.Metrics) float64 { return float64(m.Claims.CycleFailures) }},
}

func newMetrics(q *queuer.Queuer, parked func() int64) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "opsq_http_request_duration_seconds",
			Help: "HTTP requests by route, method and status, and how long they took: route /v1/reserve is the reserve latency " +
				"(a reserve that waits counts when it parks), /v1/complete, /v1/fail and /v1/submissions (ingest) theirs.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 60},
		}, []string{"route", "method", "status"}),
	}
	m.registry.MustRegister(m.requests,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&queuerCollector{q: q, parked: parked, made: time.Now()})
	return m
}

// queuerCollector reads the queuer once per scrape: the instance's counters and gauges,
// the claims loop, the forwarded requests and the cluster's figures (cached by the queuer
// for queuer.ClusterStatsTTL).
type queuerCollector struct {
	q      *queuer.Queuer
	parked func() int64
	made   time.Time // the age of the cluster's figures counts from here until one is read
}

var (
	descParked = prometheus.NewDesc("opsq_reserves_parked",
		"Reserves waiting for work on a connection taken over from the HTTP server (a part of opsq_waiters).", nil, nil)
	descForwarded = prometheus.NewDesc("opsq_forwarded_requests_total",
		"Requests this instance forwarded to another, by request (reserve, extend) and outcome: a reserve served (chunks came back), "+
			"empty (the peer had none) or failed (no answer); an extend answered or failed.", []string{"request", "outcome"}, nil)
	descScheduleRuns = prometheus.NewDesc("opsq_schedule_runs_total",
		"Schedule runs this instance recorded, by outcome: submitted, skipped (overlap skip), missed (no instance ran at its time) "+
			"or failed (the submit failed; retried after a backoff, each attempt counted).", []string{"outcome"}, nil)
	descRenew = prometheus.NewDesc("opsq_claims_renew_duration_seconds",
		"How long the successful renewals of this instance's claims took (one serializable transaction).", nil, nil)
	descSinceRenew = prometheus.NewDesc("opsq_claims_seconds_since_renewal",
		"Seconds since the last successful renewal of this instance's claims began; past claim_soft_expiry (10s) its shards stop being served.", nil, nil)
	descClusterAge = prometheus.NewDesc("opsq_cluster_stats_age_seconds",
		"Seconds since the cluster's figures (opsq_cluster_*) were last read from the database, or since the server started if never. "+
			"When a read fails the figures are left out of the scrape rather than shown stale, and this keeps growing.", nil, nil)
	descCluster  = map[string]*prometheus.Desc{}
	descInstance = map[string]*prometheus.Desc{}
)

// clusterMetrics are the cluster's figures, the same on every instance (take max() over
// instances); read from the database at most every queuer.ClusterStatsTTL. A scrape has
// them only when the last read succeeded (opsq_cluster_stats_age_seconds says how old).
var clusterMetrics = []struct {
	name, help string
	counter    bool
	value      func(queuer.ClusterStats) float64
}{
	{"opsq_cluster_submissions_in_progress", "Submissions in progress in the cluster.", false, func(s queuer.ClusterStats) float64 { return float64(s.SubmissionsInProgress) }},
	{"opsq_cluster_chunks_pending", "Chunks of submissions in progress not completed yet, in flight included.", false, func(s queuer.ClusterStats) float64 { return float64(s.ChunksPending) }},
	{"opsq_cluster_chunks_inflight", "Live reservations in the cluster, as each owner published at its last renewal.", false, func(s queuer.ClusterStats) float64 { return float64(s.ChunksInflight) }},
	{"opsq_cluster_oldest_submission_age_seconds", "Age of the oldest running submission (in progress, not paused, past its not_before), since it started; 0 when there is none.", false, func(s queuer.ClusterStats) float64 { return s.OldestAge.Seconds() }},
	{"opsq_cluster_shards_unserved", "Enabled shards that nobody holds, or whose owner stopped renewing past the soft expiry: nobody hands their chunks out.", false, func(s queuer.ClusterStats) float64 { return float64(s.ShardsUnserved) }},
	{"opsq_cluster_shards_disabled", "Shards an operator disabled.", false, func(s queuer.ClusterStats) float64 { return float64(s.ShardsDisabled) }},
	{"opsq_cluster_owner_switches_total", "Changes of owner (generations) of every shard since the cluster began.", true, func(s queuer.ClusterStats) float64 { return float64(s.OwnerSwitches) }},
	{"opsq_cluster_instances_live", "Instances whose heartbeat is younger than instance_heartbeat_timeout.", false, func(s queuer.ClusterStats) float64 { return float64(s.InstancesLive) }},
}

func init() {
	for _, m := range instanceMetrics {
		descInstance[m.name] = prometheus.NewDesc(m.name, m.help, nil, nil)
	}
	for _, c := range clusterMetrics {
		descCluster[c.name] = prometheus.NewDesc(c.name, c.help, nil, nil)
	}
}

// Describe describes nothing: an unchecked collector, since describing by collecting would
// read the database when the server is made.
func (c *queuerCollector) Describe(chan<- *prometheus.Desc) {}

func (c *queuerCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.q.Metrics()
	for _, im := range instanceMetrics {
		kind := prometheus.GaugeValue
		if im.counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(descInstance[im.name], kind, im.value(m))
	}
	ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(c.parked()))
	for _, f := range []struct {
		request, outcome string
		n                int64
	}{
		{"reserve", "served", m.ForwardServed}, {"reserve", "empty", m.ForwardEmpty}, {"reserve", "failed", m.ForwardFailed},
		{"extend", "answered", m.ExtendForwardOK}, {"extend", "failed", m.ExtendForwardFailed},
	} {
		ch <- prometheus.MustNewConstMetric(descForwarded, prometheus.CounterValue, float64(f.n), f.request, f.outcome)
	}
	runs := c.q.ScheduleRuns()
	for _, r := range []struct {
		outcome string
		n       int64
	}{
		{queuer.ScheduleRunSubmitted, runs.Submitted}, {queuer.ScheduleRunSkipped, runs.Skipped},
		{queuer.ScheduleRunMissed, runs.Missed}, {queuer.ScheduleRunFailed, runs.Failed},
	} {
		ch <- prometheus.MustNewConstMetric(descScheduleRuns, prometheus.CounterValue, float64(r.n), r.outcome)
	}
	h := m.Claims.Renewals
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Counts[i]
	}
	ch <- prometheus.MustNewConstHistogram(descRenew, h.Count, h.Sum, buckets)
	since := time.Since(m.Claims.LastRenewal).Seconds()
	if m.Claims.LastRenewal.IsZero() {
		since = 0 // the claims loop has not run yet (it runs once before the server starts)
	}
	ch <- prometheus.MustNewConstMetric(descSinceRenew, prometheus.GaugeValue, since)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cs, err := c.q.ClusterStats(ctx)
	ch <- prometheus.MustNewConstMetric(descClusterAge, prometheus.GaugeValue, time.Since(cmp.Or(cs.At, c.made)).Seconds())
	if err != nil {
		// The last read failed (the database is unreachable or slow): figures read before
		// would be shown as now — a stale 0 unserved shards during an outage. Leave them
		// out; the age above says how old the last good ones are.
		return
	}
	for _, cm := range clusterMetrics {
		kind := prometheus.GaugeValue
		if cm.counter {
			kind = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(descCluster[cm.name], kind, cm.value(cs))
	}
}

// middleware times every request under its route pattern (not its path, which holds ids)
// and its method, one of a fixed set: the labels are bounded whatever clients send.
func (m *metrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = toError(err, c).Status
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, methodLabel(c.Request().Method), strconv.Itoa(status)).Observe(time.Since(start).Seconds())
		return err
	}
}

// methodLabel bounds the method label: a client may send any method name, and each would
// be a new series.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
