// Package api is opsq's REST API v1 (DESIGN.md §3) on echo/v4: routing, request
// validation and the mapping of errors to status codes. Everything else is the queuer's.
package api

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"opsq/api/apikeys"
	"opsq/api/tracing"
	"opsq/api/ui"
	"opsq/api/wire"
	"opsq/queuer"
)

// Defaults of Config.
const (
	MaxBodyDefault          = 32 << 20  // OPSQ_MAX_BODY
	MaxChunkBytesDefault    = 1 << 20   // OPSQ_MAX_CHUNK_BYTES
	MaxIngestsDefault       = 8         // OPSQ_MAX_INGESTS
	MaxResultStreamsDefault = 8         // OPSQ_MAX_RESULT_STREAMS
	MaxFollowDefault        = time.Hour // OPSQ_MAX_FOLLOW
)

// Config configures the API.
type Config struct {
	// Queuer serves the requests. Required.
	Queuer *queuer.Queuer
	// Tracing, when set, makes a span of each request (joining its traceparent header)
	// for the database spans of its pool's tracer to go under; nil: no spans, and no cost
	// (tracing.FromEnv returns nil when OTEL_EXPORTER_OTLP_ENDPOINT is unset).
	Tracing *tracing.Provider
	// Keys, when set, is the cache of the API keys every request but /healthz and /readyz
	// must carry one of (auth.go); nil serves without keys (OPSQ_AUTH=off).
	Keys *apikeys.Set
	// Ready reports whether the instance can serve (GET /readyz). Defaults to Queuer.Ready.
	Ready func(ctx context.Context) error
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxBody bounds a JSON body, in bytes; an NDJSON body has no total limit. Defaults to
	// 32 MiB.
	MaxBody int64
	// MaxChunkBytes bounds one chunk's content, in bytes. Defaults to 1 MiB.
	MaxChunkBytes int
	// MaxIngests bounds the submissions (POST /v1/submissions) served at once; each holds
	// a database connection while it streams. Beyond it a request waits up to LimitWait,
	// then gets 503 with Retry-After. Defaults to 8.
	MaxIngests int
	// MaxResultStreams bounds the results streams (GET /v1/submissions/{id}/results)
	// served at once, like MaxIngests. Defaults to 8.
	MaxResultStreams int
	// MaxFollow bounds how long one results stream with ?follow=true lasts: it then ends
	// after a whole line, before the submission has finished, and the client follows
	// again, skipping the lines it has (the Go client's ResultsFollow does). Defaults to 1h.
	MaxFollow time.Duration
	// LimitWait is how long a request beyond MaxIngests or MaxResultStreams waits for a
	// slot. Defaults to 1s.
	LimitWait time.Duration
	// BodyIdleTimeout cuts a request body that sends nothing for that long (408, its
	// transaction rolled back) and a results stream whose reader reads nothing for that
	// long. Defaults to 30s.
	BodyIdleTimeout time.Duration
	// MaxSubmissionChunks bounds the chunks of one submission: chunk_count, or the chunks
	// of a JSON or NDJSON body; 0 or less is the default. Defaults to 100 000 000
	// (MaxSubmissionChunksDefault).
	MaxSubmissionChunks int64
	// MaxReserveBytes bounds a reserve answer: it stops adding chunks once it is this many
	// bytes of JSON, and always holds at least one chunk; 0 or less is the default.
	// Defaults to 16 MiB (MaxReserveBytesDefault), which is also its most.
	MaxReserveBytes int
	// MaxLease bounds the lease a reserve or extend may ask for (OPSQ_MAX_LEASE): past it,
	// 400 naming "lease"; a request that names none gets the lesser of 5m and it. Between
	// 1s and 24h (wire.MinLease, wire.MaxLease); 0 or less is the default. Defaults to 24h.
	MaxLease time.Duration
	// AuthFailuresPerSecond is how many failed authentications a client address may have
	// in a second before its failures are answered 429 for 5s instead of 401
	// (OPSQ_AUTH_FAILURES_PER_SECOND, authfail.go); 0 or less is the default. Defaults to 20.
	AuthFailuresPerSecond int
	// MaxInflightBytes bounds the bytes the instance holds for request bodies (counted as
	// decoded) and answers being built, summed over all requests: a request that would
	// pass it waits up to LimitWait, then gets 503 with Retry-After. Defaults to 256 MiB
	// (MaxInflightBytesDefault).
	MaxInflightBytes int64
	// BodyMinBytes is the upload rate floor: a request body that brings less than this
	// many bytes in any BodyIdleTimeout spent waiting for it is cut (408); less than 0: no
	// floor. Defaults to 16 KiB (BodyMinBytesDefault).
	BodyMinBytes int64
	// MaxIngestTime bounds how long one submission may take, its body and its insert
	// (408 past it, nothing kept). Defaults to 1h (MaxIngestTimeDefault).
	MaxIngestTime time.Duration
	// SlotMinRate is the least rate, in bytes a second, at which an upload keeps its
	// ingest slot while other clients wait for one, once SlotGrace has passed: a slower
	// one is cut (408, nothing kept) and its slot goes to a waiter (slots.go); less than 0:
	// never. Defaults to 4 KiB/s (SlotMinRateDefault).
	SlotMinRate int64
	// SlotGrace is how long an upload runs before SlotMinRate applies to it, and how long
	// a results stream may have nothing to send (a follow) or nothing read before it
	// gives its slot up to a waiting client. Defaults to 5s (SlotGraceDefault).
	SlotGrace time.Duration
	// SmallSubmissionBytes: a JSON submission of at most this many bytes, its length
	// given, is read whole before it asks for an ingest slot, so that its client holds
	// none while it sends; less than 0: none is. Defaults to 8 KiB
	// (SmallSubmissionBytesDefault).
	SmallSubmissionBytes int64
	// AdvertiseURL is the URL the instance is reached at (OPSQ_ADVERTISE_URL): the servers
	// of the document at GET /v1/openapi.json. Defaults to none: the document's own
	// (http://localhost:3999, the address of "make run").
	AdvertiseURL string

	// beforeAnswer, when set (tests only), runs when a reserve has taken chunks, right
	// before it checks that its client is still there and answers; r is the reserve's
	// request, conn its connection when the reserve was parked (else nil).
	beforeAnswer func(r *http.Request, conn net.Conn)
}

type server struct {
	cfg     Config
	q       *queuer.Queuer
	log     *slog.Logger
	parking *parking
	now     func() time.Time // where a not_before given as a duration counts from

	authFails *authFailures // failed authentications by address (authfail.go)
	budget    *budget       // the bytes held for bodies and answers (budget.go)
}

// New returns the HTTP handler of the API.
func New(cfg Config) *Handler {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.MaxBody = cmp.Or(cfg.MaxBody, MaxBodyDefault)
	cfg.MaxChunkBytes = cmp.Or(cfg.MaxChunkBytes, MaxChunkBytesDefault)
	cfg.MaxIngests = cmp.Or(cfg.MaxIngests, MaxIngestsDefault)
	cfg.MaxResultStreams = cmp.Or(cfg.MaxResultStreams, MaxResultStreamsDefault)
	cfg.MaxFollow = cmp.Or(cfg.MaxFollow, MaxFollowDefault)
	cfg.LimitWait = cmp.Or(cfg.LimitWait, LimitWaitDefault)
	cfg.BodyIdleTimeout = cmp.Or(cfg.BodyIdleTimeout, BodyIdleTimeoutDefault)
	cfg.MaxSubmissionChunks = cmp.Or(max(cfg.MaxSubmissionChunks, 0), MaxSubmissionChunksDefault)
	cfg.MaxReserveBytes = cmp.Or(max(cfg.MaxReserveBytes, 0), MaxReserveBytesDefault)
	cfg.MaxLease = min(max(cmp.Or(max(cfg.MaxLease, 0), wire.MaxLease), wire.MinLease), wire.MaxLease)
	if cfg.Ready == nil {
		cfg.Ready = cfg.Queuer.Ready
	}
	cfg.MaxInflightBytes = cmp.Or(max(cfg.MaxInflightBytes, 0), MaxInflightBytesDefault)
	cfg.BodyMinBytes = cmp.Or(cfg.BodyMinBytes, BodyMinBytesDefault)
	cfg.MaxIngestTime = cmp.Or(cfg.MaxIngestTime, MaxIngestTimeDefault)
	cfg.SlotMinRate = max(cmp.Or(cfg.SlotMinRate, SlotMinRateDefault), 0)
	cfg.SlotGrace = cmp.Or(cfg.SlotGrace, SlotGraceDefault)
	cfg.SmallSubmissionBytes = max(cmp.Or(cfg.SmallSubmissionBytes, SmallSubmissionBytesDefault), 0)
	s := &server{cfg: cfg, q: cfg.Queuer, log: cfg.Logger, parking: newParking(), now: time.Now,
		authFails: newAuthFailures(cfg.Logger, cfg.AuthFailuresPerSecond), budget: newBudget(cfg.MaxInflightBytes, cfg.LimitWait)}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(cfg.Logger)
	e.Pre(headAsGet)
	e.Use(recoverPanics(cfg.Logger))
	if cfg.Tracing != nil {
		e.Use(cfg.Tracing.Middleware())
	}
	m := newMetrics(cfg.Queuer, s.parking.now.Load)
	m.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "opsq_inflight_bytes",
			Help: "Bytes of the memory budget (at most OPSQ_MAX_INFLIGHT_BYTES) that requests in flight hold now: bodies counted as decoded, list pages, reserve answers."},
			func() float64 { return float64(s.budget.used()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "opsq_inflight_refused_total",
			Help: "Requests refused with 503 because the memory budget (OPSQ_MAX_INFLIGHT_BYTES) had no room for them."},
			func() float64 { return float64(s.budget.refused.Load()) }))
	ingests := newSlots("ingests", "OPSQ_MAX_INGESTS", cfg.MaxIngests, cfg.LimitWait, cfg.SlotMinRate, cfg.SlotGrace)
	streams := newSlots("results streams", "OPSQ_MAX_RESULT_STREAMS", cfg.MaxResultStreams, cfg.LimitWait, 0, cfg.SlotGrace)
	for _, l := range []*slots{ingests, streams} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "opsq_slots_given_up_total",
			Help:        "Requests that gave their slot up to a waiting client: over their key's share, or of no use (an upload under OPSQ_SLOT_MIN_RATE, a follow with nothing to send, a stalled reader).",
			ConstLabels: prometheus.Labels{"kind": l.what}}, func() float64 { return float64(l.taken.Load()) }))
	}
	e.Use(m.middleware)
	e.Use(bodyIdle(cfg.BodyIdleTimeout, cfg.BodyMinBytes, cfg.MaxBody))
	e.Use(s.budget.middleware)
	e.Use(loginFormBound)
	e.GET("/metrics", echo.WrapHandler(m.handler()), s.authenticate(metricsRoles))

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz(newReadyLog(cfg.Logger)))

	// The roles of each route: auth.go.
	v1 := e.Group("/v1")
	v1.POST("/submissions", s.submit, s.authenticate(producerRoles), ingests.ingestMiddleware(cfg.SmallSubmissionBytes))
	v1.GET("/submissions", s.list, s.authenticate(producerRoles))
	v1.GET("/submissions/:id", s.status, s.authenticate(readerRoles))
	v1.GET("/submissions/:id/results", s.results, s.authenticate(producerRoles), streams.streamMiddleware, writeIdle(cfg.BodyIdleTimeout))
	v1.GET("/submissions/:id/failures", s.failures, s.authenticate(producerRoles))
	v1.POST("/submissions/:id/cancel", s.cancel, s.authenticate(producerRoles))
	v1.POST("/submissions/:id/retry", s.retry, s.authenticate(producerRoles))
	v1.POST("/submissions/:id/pause", s.pause, s.authenticate(producerRoles))
	v1.POST("/submissions/:id/resume", s.resume, s.authenticate(producerRoles))
	v1.POST("/submissions/retry", s.retryMany, s.authenticate(producerRoles))
	v1.POST("/reserve", s.reserve, s.authenticate(consumerRoles))
	v1.POST("/reserve/preview", s.preview, s.authenticate(consumerRoles))
	v1.POST("/reserve/giveback", s.giveBack, s.authenticate(consumerRoles))
	v1.POST("/complete", s.complete, s.authenticate(consumerRoles))
	v1.POST("/fail", s.fail, s.authenticate(consumerRoles))
	v1.POST("/extend", s.extend, s.authenticate(consumerRoles))
	v1.POST("/throttle", s.throttle, s.authenticate(consumerRoles))
	v1.DELETE("/throttle", s.liftThrottle, s.authenticate(consumerRoles))
	v1.POST("/schedules", s.createSchedule, s.authenticate(producerRoles))
	v1.GET("/schedules", s.listSchedules, s.authenticate(producerRoles))
	v1.GET("/schedules/:name", s.getSchedule, s.authenticate(producerRoles))
	v1.PUT("/schedules/:name", s.replaceSchedule, s.authenticate(producerRoles))
	v1.DELETE("/schedules/:name", s.deleteSchedule, s.authenticate(producerRoles))
	v1.POST("/schedules/:name/pause", s.pauseSchedule(false), s.authenticate(producerRoles))
	v1.POST("/schedules/:name/resume", s.pauseSchedule(true), s.authenticate(producerRoles))
	v1.POST("/schedules/:name/trigger", s.triggerSchedule, s.authenticate(producerRoles))
	v1.POST("/schedules/:name/backfill", s.backfillSchedule, s.authenticate(producerRoles))
	v1.GET("/cluster", s.cluster, s.authenticate(adminRoles))
	v1.GET("/openapi.json", openAPI(servedOpenAPI(cfg.AdvertiseURL))) // open to all, like /healthz: the API's description
	// The dashboard, /ui/.
	ui.Register(e, ui.Config{Queuer: cfg.Queuer, Keys: cfg.Keys, Logger: cfg.Logger,
		AuthFailed: func(c echo.Context, key, why string) error { return s.authFails.failed(c, key, why, nil) }})
	return &Handler{Handler: e, parking: s.parking, budget: s.budget, ingests: ingests, streams: streams}
}
