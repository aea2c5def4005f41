package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"opsq/queuer"
)

// metrics are the Prometheus metrics of one API server, on GET /metrics. Each server has
// its own registry, so that several servers in one process (the tests) do not collide.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.HistogramVec
}

// gauges are read from the queuer's counters at each scrape.
var gauges = []struct {
	name, help string
	value      func(queuer.Stats) float64
}{
	{"opsq_reservations", "Live reservations held by this instance.", func(s queuer.Stats) float64 { return float64(s.Reservations) }},
	{"opsq_shards_owned", "Shards this instance claims (reservable or draining).", func(s queuer.Stats) float64 { return float64(s.ShardsOwned) }},
	{"opsq_shards_reservable", "Shards this instance reserves from now.", func(s queuer.Stats) float64 { return float64(s.ShardsReservable) }},
	{"opsq_reserved_total", "Chunks reserved from this instance's shards.", func(s queuer.Stats) float64 { return float64(s.Reserved) }},
	{"opsq_completed_total", "Chunks completed through this instance.", func(s queuer.Stats) float64 { return float64(s.Completed) }},
	{"opsq_failed_attempts_total", "Failed attempts reported through this instance, retried or final.", func(s queuer.Stats) float64 { return float64(s.FailedAttempts) }},
	{"opsq_expired_total", "Reservations of this instance whose lease ran out.", func(s queuer.Stats) float64 { return float64(s.Expired) }},
	{"opsq_forwarded_total", "Reserve requests this instance forwarded to another.", func(s queuer.Stats) float64 { return float64(s.Forwarded) }},
	{"opsq_chunks_ingested_total", "Chunks inserted through this instance.", func(s queuer.Stats) float64 { return float64(s.ChunksIngested) }},
}

func newMetrics(stats func() queuer.Stats) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "opsq_http_request_duration_seconds",
			Help:    "HTTP requests by route, method and status, and how long they took.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 60},
		}, []string{"route", "method", "status"}),
	}
	m.registry.MustRegister(m.requests,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, g := range gauges {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: g.name, Help: g.help},
			func() float64 { return g.value(stats()) }))
	}
	return m
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
