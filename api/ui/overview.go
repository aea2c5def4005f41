package ui

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/queuer"
)

// The completion chart: one x unit per minute of the last 24 h, drawn by the server as
// SVG paths (no script library), from the minutes kept in PostgreSQL (admin.Minutes).
const (
	chartMinutes = 24 * 60
	chartHeight  = 120
)

// chartView is the chart of completions and failed attempts per minute, its zoom on the
// last hour, and their figures.
type chartView struct {
	Completed     string `json:"chart_completed"`      // the area under the completions (an SVG path)
	Failed        string `json:"chart_failed"`         // the line of the failed attempts
	Top           string `json:"chart_top"`            // the most in one minute: the chart's top
	HourCompleted string `json:"chart_hour_completed"` // the same for the last hour
	HourFailed    string `json:"chart_hour_failed"`
	HourTop       string `json:"chart_hour_top"`
	CompletedHour string `json:"completed_hour"`
	FailedHour    string `json:"failed_hour"`
	CompletedDay  string `json:"completed_day"`
	FailedDay     string `json:"failed_day"`
	LastMinute    string `json:"last_minute"` // completions in the last full minute
}

// activityChart draws minutes (oldest first, as admin.Minutes returns them) over the 24 h
// that end at now's minute; minutes without a row count nothing.
func activityChart(minutes []queuer.Minute, now time.Time) chartView {
	end := now.UTC().Truncate(time.Minute)
	start := end.Add(-(chartMinutes - 1) * time.Minute)
	var completed, failed [chartMinutes]int64
	for _, m := range minutes {
		if i := int(m.At.UTC().Sub(start) / time.Minute); i >= 0 && i < chartMinutes {
			completed[i], failed[i] = m.Completed, m.Failed
		}
	}
	hourC, hourF := completed[chartMinutes-60:], failed[chartMinutes-60:]
	top, hourTop := max(peak(completed[:]), peak(failed[:])), max(peak(hourC), peak(hourF))
	return chartView{
		Completed: area(completed[:], top), Failed: line(failed[:], top), Top: num(top),
		HourCompleted: area(hourC, hourTop), HourFailed: line(hourF, hourTop), HourTop: num(hourTop),
		CompletedHour: num(sum(hourC)), FailedHour: num(sum(hourF)),
		CompletedDay: num(sum(completed[:])), FailedDay: num(sum(failed[:])),
		LastMinute: num(completed[chartMinutes-2]),
	}
}

func peak(values []int64) (n int64) {
	for _, v := range values {
		n = max(n, v)
	}
	return n
}

func sum(values []int64) (n int64) {
	for _, v := range values {
		n += v
	}
	return n
}

// area is the SVG path of the area under values, one x unit each, scaled to top.
func area(values []int64, top int64) string {
	h := strconv.Itoa(chartHeight)
	return "M0," + h + " " + points(values, top, "L") + " L" + strconv.Itoa(len(values)-1) + "," + h + " Z"
}

// line is the SVG path of the line through values.
func line(values []int64, top int64) string {
	return "M" + points(values, top, "L")[1:]
}

// points writes the points of values, scaled to top, each after cmd; of a run of equal
// values only its ends, so that an idle day is a few points, not 1 440.
func points(values []int64, top int64, cmd string) string {
	scale := float64(max(top, 1))
	var b strings.Builder
	for i, n := range values {
		if i > 0 && i < len(values)-1 && n == values[i-1] && n == values[i+1] {
			continue
		}
		y := float64(chartHeight) - (float64(chartHeight)-6)*float64(n)/scale
		fmt.Fprintf(&b, "%s%d,%.1f ", cmd, i, y)
	}
	return strings.TrimSpace(b.String())
}

// consumerView is a row of "who is working".
type consumerView struct {
	Name        string `json:"name"`
	Inflight    int    `json:"inflight"`
	OldestLease string `json:"oldest_lease"`
	LastSeen    string `json:"last_seen"`
	Instances   int    `json:"instances"`
}

func consumerViews(cs []queuer.Consumer) []consumerView {
	out := make([]consumerView, len(cs))
	for i, c := range cs {
		v := consumerView{Name: c.Name, Inflight: c.Inflight, OldestLease: "—", LastSeen: ago(c.LastSeenAge) + " ago", Instances: c.Instances}
		if v.Name == "" {
			v.Name = "(unnamed)"
		}
		if c.OldestLeaseAge != nil {
			v.OldestLease = ago(*c.OldestLeaseAge)
		}
		out[i] = v
	}
	return out
}

// overviewView is what the overview page shows, and the JSON its script refreshes it from.
type overviewView struct {
	InProgress int64 `json:"in_progress"` // every phase
	// The in-progress submissions by phase (GET /v1/submissions?state=running, paused,
	// scheduled): the held ones hand nothing out, and are counted apart.
	Running         int64  `json:"running"`
	Paused          int64  `json:"paused"`
	PausedChunks    int64  `json:"paused_chunks"`
	Scheduled       int64  `json:"scheduled"`
	ScheduledNext   string `json:"scheduled_next"` // how long until the soonest starts; "—" for none
	ChunksWaiting   int64  `json:"chunks_waiting"` // of the running submissions, not in flight
	ScheduledChunks int64  `json:"scheduled_chunks"`
	Inflight        int64  `json:"inflight"`
	FailedLastHour  int64  `json:"failed_last_hour"`
	OldestID        string `json:"oldest_id"`
	OldestAge       string `json:"oldest_age"`
	chartView
	Consumers []consumerView `json:"consumers"`
	Instances []instanceView `json:"instances"`
	Limits    []limitView    `json:"limits"`
	Rates     []rateView     `json:"rates"`
	Live      int            `json:"live"`
	Draining  int            `json:"draining"`
}

// limitView is a row of "throttles and rate limits in force": a throttle (POST
// /v1/throttle) or a rate_limit bucket in use.
type limitView struct {
	Kind   string `json:"kind"` // throttle or rate_limit
	Key    string `json:"key"`
	Value  string `json:"value"`  // JSON text
	Tenant string `json:"tenant"` // a throttle's tenant; "" for every tenant
	Detail string `json:"detail"`
	// Rate is the value's chunks handed out per second over the last minute, cluster-wide
	// ("12.5/s"); "—" when the value is not among the top ones (rateViews).
	Rate string `json:"rate"`
	// SetBy says who set a throttle and when ("set by c1 at 10:31:02 UTC"); "—" for a
	// rate_limit.
	SetBy string `json:"set_by"`
	// Lift is the confirmation page of lifting a throttle; "" for a rate_limit.
	Lift string `json:"lift"`
}

// rateView is a row of "recent rates per value": a value of a key the strategies limit,
// and the chunks of it handed out over the last minute, cluster-wide.
type rateView struct {
	Key   string `json:"key"`
	Value string `json:"value"` // JSON text
	Rate  string `json:"rate"`  // per second
	Count string `json:"count"` // in the instances' windows, about a minute
}

func rateViews(rates []queuer.ValueRate) []rateView {
	out := make([]rateView, len(rates))
	for i, r := range rates {
		out[i] = rateView{Key: r.Key, Value: r.Value, Rate: perSecond(r.PerS), Count: num(r.Count)}
	}
	return out
}

// perSecond writes a rate per second: two decimals under 1, one under 100, else a whole
// number with its thousands separated.
func perSecond(r float64) string {
	switch {
	case r < 1:
		return strconv.FormatFloat(r, 'f', 2, 64) + "/s"
	case r < 100:
		return strconv.FormatFloat(r, 'f', 1, 64) + "/s"
	}
	return num(int64(r+0.5)) + "/s"
}

// withRates sets each limit's rate from the values' rates (those not among them: "—").
func withRates(limits []limitView, rates []queuer.ValueRate) {
	type pair struct{ key, value string }
	byValue := make(map[pair]float64, len(rates))
	for _, r := range rates {
		byValue[pair{r.Key, r.Value}] = r.PerS
	}
	for i := range limits {
		limits[i].Rate = "—"
		if r, ok := byValue[pair{limits[i].Key, limits[i].Value}]; ok {
			limits[i].Rate = perSecond(r)
		}
	}
}

// limitViews are the throttles in force (this instance's cache, the same on every
// instance) and the rate_limit buckets in use, the emptiest first; both bounded.
func limitViews(throttles []queuer.Throttle, buckets []queuer.RateBucket, now time.Time) []limitView {
	out := make([]limitView, 0, len(throttles)+len(buckets))
	for i, th := range throttles {
		if i == queuer.RateBucketsShown {
			break // the ones that end last
		}
		out = append(out, limitView{Kind: "throttle", Key: th.Key, Value: th.Value, Tenant: th.Tenant,
			Detail: fmt.Sprintf("until %s UTC (%s left)", th.Until.UTC().Format(time.TimeOnly), ago(th.Until.Sub(now))),
			SetBy:  setByText(th), Lift: throttleRow{Key: th.Key, Value: th.Value, Tenant: th.Tenant}.liftURL()})
	}
	for _, b := range buckets {
		out = append(out, limitView{Kind: "rate_limit", Key: b.Key, Value: b.Value,
			Detail: fmt.Sprintf("%s/s; %.1f of %d tokens in the bucket", strconv.FormatFloat(b.PerSecond, 'f', -1, 64), b.Level, b.Capacity),
			SetBy:  "—"})
	}
	return out
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
	a := d.q
	o, err := a.Overview(ctx, nil)
	if err != nil {
		return overviewView{}, err
	}
	cl, err := a.Cluster(ctx)
	if err != nil {
		return overviewView{}, err
	}
	minutes, now, err := a.Minutes(ctx)
	if err != nil {
		return overviewView{}, fmt.Errorf("reading the completions per minute: %w", err)
	}
	consumers, err := a.Consumers(ctx)
	if err != nil {
		return overviewView{}, fmt.Errorf("reading who is working: %w", err)
	}
	v := overviewView{
		InProgress: o.InProgress, Running: o.Running, Paused: o.Paused, PausedChunks: o.PausedChunksLeft,
		Scheduled: o.Scheduled, ScheduledChunks: o.ScheduledChunksLeft, ScheduledNext: "—",
		// In flight are chunks of running submissions, but for the few a pause let finish.
		ChunksWaiting: max(o.RunningChunksLeft-o.Inflight, 0), Inflight: o.Inflight,
		FailedLastHour: o.FailedLastHour, OldestID: "—", OldestAge: "—",
		chartView: activityChart(minutes, now), Consumers: consumerViews(consumers),
	}
	if o.NextScheduledAt != nil {
		v.ScheduledNext = "in " + ago(o.NextScheduledAt.Sub(o.Now))
	}
	if o.OldestID != nil {
		v.OldestID = strconv.FormatInt(*o.OldestID, 10)
		v.OldestAge = ago(o.Now.Sub(*o.OldestCreatedAt))
	}
	buckets, err := a.RateBuckets(ctx)
	if err != nil {
		return overviewView{}, err
	}
	rates, err := a.ValueRates(ctx)
	if err != nil {
		return overviewView{}, fmt.Errorf("reading the values' rates: %w", err)
	}
	v.Limits = limitViews(d.q.ThrottlesInForce(), buckets, time.Now())
	withRates(v.Limits, rates)
	v.Rates = rateViews(rates)
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
