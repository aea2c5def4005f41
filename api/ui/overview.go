package ui

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/queuer"
)

// Bounds of the completion chart.
const (
	rateWindow   = 15 * time.Minute
	rateInterval = 5 * time.Second // at most one sample per interval
	rateSamples  = int(rateWindow/rateInterval) + 1
	chartWidth   = 600
	chartHeight  = 120
)

// rateSample is the completion rate between two overviews.
type rateSample struct {
	at     time.Time // the database's clock
	perSec float64
}

// rateRing keeps the completions per second over the last 15 minutes, one sample per
// overview read at least rateInterval after the previous one: sampled while somebody looks
// at the overview, so the chart has gaps when nobody did. Safe for concurrent use.
type rateRing struct {
	mu struct {
		sync.Mutex
		last    *queuer.Overview // the previous sample's overview
		samples []rateSample     // oldest first, at most rateSamples
	}
}

func newRateRing() *rateRing { return &rateRing{} }

// since is the time the next overview must count finished submissions from.
func (r *rateRing) since() *time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.last == nil {
		return nil
	}
	t := r.mu.last.Now
	return &t
}

// add records o, read with since(): it becomes a sample when far enough from the last.
func (r *rateRing) add(o queuer.Overview, since *time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.mu.last
	switch {
	case last == nil || since == nil:
		r.mu.last = &o
		return
	case !since.Equal(last.Now) || o.Now.Sub(last.Now) < rateInterval:
		return // another request sampled meanwhile, or too soon
	}
	per := float64(o.Completed(*last)) / o.Now.Sub(last.Now).Seconds()
	r.mu.samples = append(r.mu.samples, rateSample{at: o.Now, perSec: per})
	if n := len(r.mu.samples); n > rateSamples {
		r.mu.samples = append(r.mu.samples[:0], r.mu.samples[n-rateSamples:]...)
	}
	r.mu.last = &o
}

// chart returns the polyline points of the last 15 minutes ending at now, the highest
// rate and the latest.
func (r *rateRing) chart(now time.Time) (points string, top, latest float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := now.Add(-rateWindow)
	for _, s := range r.mu.samples {
		top = max(top, s.perSec)
	}
	if n := len(r.mu.samples); n > 0 {
		latest = r.mu.samples[n-1].perSec
	}
	scale := max(top, 1)
	var b strings.Builder
	for _, s := range r.mu.samples {
		if s.at.Before(from) {
			continue
		}
		x := float64(chartWidth) * s.at.Sub(from).Seconds() / rateWindow.Seconds()
		y := float64(chartHeight) - (float64(chartHeight)-10)*s.perSec/scale
		fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
	}
	return strings.TrimSpace(b.String()), top, latest
}

// area closes the polyline points into the polygon under them.
func area(points string) string {
	if points == "" {
		return ""
	}
	first, _, _ := strings.Cut(points, ",")
	last := points[strings.LastIndexByte(points, ' ')+1:]
	lastX, _, _ := strings.Cut(last, ",")
	return fmt.Sprintf("%s %s,%d %s,%d", points, lastX, chartHeight, first, chartHeight)
}

// overviewView is what the overview page shows, and the JSON its script refreshes it from.
type overviewView struct {
	InProgress     int64          `json:"in_progress"`
	ChunksWaiting  int64          `json:"chunks_waiting"`
	Inflight       int64          `json:"inflight"`
	FailedLastHour int64          `json:"failed_last_hour"`
	OldestID       string         `json:"oldest_id"`
	OldestAge      string         `json:"oldest_age"`
	RateLatest     string         `json:"rate_latest"`
	RateTop        string         `json:"rate_top"`
	ChartPoints    string         `json:"chart_points"`
	ChartArea      string         `json:"chart_area"`
	Instances      []instanceView `json:"instances"`
	Live           int            `json:"live"`
	Draining       int            `json:"draining"`
}

// instanceView is a row of the instance tables.
type instanceView struct {
	ID           string `json:"id"`
	URL          string `json:"url"`
	State        string `json:"state"` // live, draining or gone
	HeartbeatAge string `json:"heartbeat_age"`
	Shards       int    `json:"shards"`
	Inflight     int    `json:"inflight"`
	Color        string `json:"color"`
	Draining     bool   `json:"draining"`
}

func (d *dashboard) overviewData(ctx context.Context) (overviewView, error) {
	since := d.rate.since()
	o, err := d.q.Admin().Overview(ctx, since)
	if err != nil {
		return overviewView{}, err
	}
	d.rate.add(o, since)
	cl, err := d.q.Admin().Cluster(ctx)
	if err != nil {
		return overviewView{}, err
	}
	v := overviewView{
		InProgress: o.InProgress, ChunksWaiting: max(o.ChunksLeft-o.Inflight, 0), Inflight: o.Inflight,
		FailedLastHour: o.FailedLastHour, OldestID: "—", OldestAge: "—",
	}
	if o.OldestID != nil {
		v.OldestID = strconv.FormatInt(*o.OldestID, 10)
		v.OldestAge = ago(o.Now.Sub(*o.OldestCreatedAt))
	}
	points, top, latest := d.rate.chart(o.Now)
	v.ChartPoints, v.ChartArea = points, area(points)
	v.RateTop, v.RateLatest = strconv.FormatFloat(top, 'f', 1, 64), strconv.FormatFloat(latest, 'f', 1, 64)
	v.Instances = instanceViews(cl, time.Now())
	for _, in := range v.Instances {
		switch in.State {
		case "live":
			v.Live++
		case "draining":
			v.Draining++
		}
	}
	return v, nil
}

// palette colours the instances of the shard map, in the order of their ids.
var palette = []string{"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f"}

func instanceViews(cl queuer.Cluster, now time.Time) []instanceView {
	out := make([]instanceView, len(cl.Instances))
	for i, in := range cl.Instances {
		v := instanceView{ID: in.ID, URL: in.AdvertiseURL, State: "gone", HeartbeatAge: "—", Shards: len(in.Shards),
			Color: palette[i%len(palette)], Draining: in.Draining}
		switch {
		case in.Draining:
			v.State = "draining"
		case in.Live:
			v.State = "live"
		}
		if in.HeartbeatAt != nil {
			v.HeartbeatAge = ago(now.Sub(*in.HeartbeatAt))
		}
		for _, s := range in.Shards {
			v.Inflight += s.Inflight
		}
		out[i] = v
	}
	return out
}

func (d *dashboard) overview(c echo.Context) error {
	v, err := d.overviewData(c.Request().Context())
	if err != nil {
		return err
	}
	return d.render(c, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Live: "overview", Data: v})
}

func (d *dashboard) overviewJSON(c echo.Context) error {
	v, err := d.overviewData(c.Request().Context())
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, v)
}
