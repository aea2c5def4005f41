// Package ui is opsq's web dashboard at /ui/ (DESIGN.md §3, Operations): pages rendered on
// the server with html/template from files embedded in the binary, and a little plain
// JavaScript that refreshes them from small JSON answers. Every instance serves it; what it
// shows comes from the database, so every instance shows the same: the cluster, and what
// the instances write of their activity (completions per minute, who is working).
//
// The overview lists the throttles and rate limits in force, who set each throttle and
// when, and a button that lifts a throttle (throttles.go).
package ui

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/queuer"
)

//go:embed templates/*.html static/*
var files embed.FS

// Config configures the dashboard.
type Config struct {
	// Queuer answers what the pages show. Required.
	Queuer *queuer.Queuer
	// Keys, when set, makes the dashboard ask for an admin key once and keep it in an
	// HttpOnly, SameSite=Strict cookie (auth.go); nil serves it without keys
	// (OPSQ_AUTH=off), like the API.
	Keys *apikeys.Set
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// AuthFailed, when set, records a failed login of c's request with key ("" for none),
	// why saying what was wrong (never the key), and returns nil, or the error to answer
	// instead of the login form when its address has failed too often (the API's failure
	// throttle and log, api/authfail.go).
	AuthFailed func(c echo.Context, key, why string) error
}

// dashboard serves the pages. It is safe for concurrent use; it has no goroutine.
type dashboard struct {
	q     *queuer.Queuer
	keys  *apikeys.Set
	log   *slog.Logger
	pages map[string]*template.Template
	// authFailed is Config.AuthFailed, or one that records nothing.
	authFailed func(c echo.Context, key, why string) error
}

// Register adds the dashboard's routes under /ui/ to e.
func Register(e *echo.Echo, cfg Config) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &dashboard{q: cfg.Queuer, keys: cfg.Keys, log: cfg.Logger, pages: parsePages(), authFailed: cfg.AuthFailed}
	if d.authFailed == nil {
		d.authFailed = func(echo.Context, string, string) error { return nil }
	}
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusFound, "/ui/") })
	static, _ := fs.Sub(files, "static")
	e.GET("/ui/static/*", echo.WrapHandler(http.StripPrefix("/ui/static/", http.FileServer(http.FS(static)))), headers)
	e.GET("/ui/login", d.loginPage, headers)
	e.POST("/ui/login", d.login, headers, sameOrigin)
	e.POST("/ui/logout", d.logout, headers, sameOrigin)
	g := e.Group("/ui", headers, sameOrigin, d.authenticate)
	g.GET("/", d.overview)
	g.GET("/overview.json", d.overviewJSON)
	g.GET("/submissions", d.submissions)
	g.GET("/submissions.json", d.submissionsJSON)
	g.GET("/submissions/confirm", d.confirmMany)
	g.POST("/submissions/action", d.actMany)
	g.GET("/submissions/:id", d.submission)
	g.GET("/submissions/:id/progress", d.progress)
	g.GET("/submissions/:id/failures.json", d.failuresJSON)
	g.GET("/submissions/:id/chunks", d.chunkJump)
	g.GET("/submissions/:id/chunks/:index", d.chunkOf)
	g.GET("/submissions/:id/chunks/:index/retry", d.confirmRetryChunk)
	g.POST("/submissions/:id/chunks/:index/retry", d.retryChunk)
	g.GET("/submissions/:id/cancel", d.confirmCancel)
	g.POST("/submissions/:id/cancel", d.cancel)
	g.GET("/submissions/:id/confirm", d.confirmSubmission)
	g.POST("/submissions/:id/action", d.submissionAction)
	g.GET("/cluster", d.cluster)
	g.GET("/cluster.json", d.clusterJSON)
	g.GET("/cluster/confirm", d.confirmAction)
	g.POST("/cluster/action", d.action)
	g.GET("/strategy", d.strategy)
	g.GET("/schedules", d.schedules)
	g.GET("/schedules/:tenant/:name", d.schedule)
	g.GET("/schedules/:tenant/:name/confirm", d.confirmSchedule)
	g.POST("/schedules/:tenant/:name/action", d.scheduleAction)
	g.GET("/throttles/confirm", d.confirmLift)
	g.POST("/throttles/lift", d.lift)
}

var funcs = template.FuncMap{
	"num":   numAny,
	"cut":   cut,
	"chips": chips,
	"age": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return ago(time.Since(*t))
	},
	"pct": func(part, total int64) string {
		if total <= 0 {
			return "0"
		}
		return strconv.FormatFloat(100*float64(part)/float64(total), 'f', 2, 64)
	},
	"query": func(kv ...string) template.URL {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				v.Set(kv[i], kv[i+1])
			}
		}
		return template.URL(v.Encode())
	},
}

// parsePages parses each page with the layout: every page defines "content".
func parsePages() map[string]*template.Template {
	pages := map[string]*template.Template{}
	for _, name := range []string{"overview", "submissions", "submission", "chunk", "cluster", "confirm", "strategy", "schedules", "schedule", "error", "login"} {
		pages[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
	}
	return pages
}

// page is what the layout renders.
type page struct {
	Title string
	Nav   string // the menu entry to mark
	Live  string // the live-update routine of app.js, "" for none
	Data  any
	Keys  bool // keys are on: the layout offers to log out
}

func (d *dashboard) render(c echo.Context, status int, name string, p page) error {
	p.Keys = d.keys != nil && name != "login"
	var b bytes.Buffer
	if err := d.pages[name].Execute(&b, p); err != nil {
		return fmt.Errorf("rendering %s: %w", name, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store") // the CSP and its like: headers (auth.go)
	return c.HTMLBlob(status, b.Bytes())
}

// fail renders an error page; a failure of the database goes to the API's error handler.
func (d *dashboard) fail(c echo.Context, status int, format string, args ...any) error {
	return d.render(c, status, "error", page{Title: "Error", Data: fmt.Sprintf(format, args...)})
}

// notFound is err when it says the target does not exist, for fail.
func notFound(err error) bool {
	return errors.Is(err, queuer.ErrNotFound) || errors.Is(err, queuer.ErrNoSuchTarget)
}

// ago writes a duration as an age: "4s", "3m12s", "2h05m", "3d04h".
func ago(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func trimmed(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
