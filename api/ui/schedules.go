package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/queuer"
)

// Schedules (issue 32, DESIGN.md §3 "Work that starts itself"): the schedules page lists
// the schedules (of one tenant with ?tenant=, of every tenant without), a page of at most
// queuer.ScheduleListMax, with their cron, time zone, whether paused, next runs and last
// submission; a schedule's page adds its last runs (at most queuer.ScheduleRunsKept). Its
// Pause, Resume and Trigger buttons lead to a confirmation page whose form POSTs
// (sameOrigin checks it), as every action of the dashboard does, and call the engine's
// verbs, the same as /v1/schedules/{name}/pause, /resume and /trigger. The dashboard opens
// to admin sessions only (auth.go): every session may act, in every tenant.

// scheduleView is a schedule as the pages show it.
type scheduleView struct {
	Tenant, Name, Cron, Timezone, Overlap, CatchUp string
	Paused                                         bool
	NextRuns                                       []string
	LastSubmission                                 string // "" for none
	URL                                            string // its page
	Runs                                           []runView
}

// runView is one run of a schedule.
type runView struct {
	ScheduledAt, Outcome, Submission, Error, At string
	Attempts                                    int
}

func toScheduleView(sc queuer.Schedule) scheduleView {
	v := scheduleView{Tenant: sc.Tenant, Name: sc.Name, Cron: sc.Cron, Timezone: sc.Timezone, Overlap: sc.Overlap,
		CatchUp: sc.CatchUp, Paused: sc.Paused, URL: scheduleURL(sc.Tenant, sc.Name, "")}
	for _, t := range sc.NextRuns {
		v.NextRuns = append(v.NextRuns, t.UTC().Format(time.RFC3339))
	}
	if sc.LastSubmissionID != 0 {
		v.LastSubmission = strconv.FormatInt(sc.LastSubmissionID, 10)
	}
	for _, r := range sc.LastRuns {
		rv := runView{ScheduledAt: r.ScheduledAt.UTC().Format(time.RFC3339), Outcome: r.Outcome, Error: r.Error,
			At: r.At.UTC().Format(time.RFC3339), Attempts: r.Attempts}
		if r.SubmissionID != 0 {
			rv.Submission = strconv.FormatInt(r.SubmissionID, 10)
		}
		v.Runs = append(v.Runs, rv)
	}
	return v
}

// scheduleURL is the page of a schedule, or with verb, the confirmation of that action.
func scheduleURL(tenant, name, verb string) string {
	u := "/ui/schedules/" + url.PathEscape(tenant) + "/" + url.PathEscape(name)
	if verb != "" {
		u += "/confirm?action=" + verb
	}
	return u
}

// schedulesView is the schedules page.
type schedulesView struct {
	Tenant    string
	Rows      []scheduleView
	Error     string
	NextURL   string // the next page; "" for none
	FirstPage bool
}

func (d *dashboard) schedules(c echo.Context) error {
	v := schedulesView{Tenant: c.QueryParam("tenant"), FirstPage: c.QueryParam("after_name") == ""}
	if v.Tenant != "" {
		if err := queuer.CheckTenant(v.Tenant); err != nil {
			v.Error = "tenant: " + err.Error()
			return d.render(c, http.StatusOK, "schedules", page{Title: "Schedules", Nav: "schedules", Data: v})
		}
	}
	list, more, err := d.q.Schedules(c.Request().Context(), v.Tenant, c.QueryParam("after_tenant"), c.QueryParam("after_name"))
	if err != nil {
		return err
	}
	for _, sc := range list {
		v.Rows = append(v.Rows, toScheduleView(sc))
	}
	if more && len(list) > 0 {
		last := list[len(list)-1]
		v.NextURL = "/ui/schedules?" + url.Values{"tenant": {v.Tenant}, "after_tenant": {last.Tenant}, "after_name": {last.Name}}.Encode()
	}
	return d.render(c, http.StatusOK, "schedules", page{Title: "Schedules", Nav: "schedules", Data: v})
}

// scheduleOf reads the schedule the path names, with its last runs. With ok false, the
// answer is an error page already written (err is what writing it returned) or err is the
// failure to answer.
func (d *dashboard) scheduleOf(c echo.Context) (sc queuer.Schedule, ok bool, err error) {
	tenant, name, err := scheduleNames(c)
	if err != nil {
		return sc, false, d.fail(c, http.StatusBadRequest, "%s", err)
	}
	sc, err = d.q.Schedule(c.Request().Context(), tenant, name)
	if errors.Is(err, queuer.ErrScheduleNotFound) {
		return sc, false, d.fail(c, http.StatusNotFound, "no schedule %q in tenant %s", name, tenant)
	}
	return sc, err == nil, err
}

// scheduleNames reads and checks the tenant and name of the path.
func scheduleNames(c echo.Context) (tenant, name string, err error) {
	tenant, name = c.Param("tenant"), c.Param("name")
	if c.Request().URL.RawPath != "" { // echo routed on the escaped path: its params are escaped
		if tenant, err = url.PathUnescape(tenant); err == nil {
			name, err = url.PathUnescape(name)
		}
		if err != nil {
			return "", "", errors.New("name: not a path of a schedule")
		}
	}
	if err := queuer.CheckTenant(tenant); err != nil {
		return "", "", fmt.Errorf("tenant: %v", err)
	}
	if err := queuer.CheckScheduleName(name); err != nil {
		return "", "", err
	}
	return tenant, name, nil
}

func (d *dashboard) schedule(c echo.Context) error {
	sc, ok, err := d.scheduleOf(c)
	if !ok {
		return err
	}
	return d.render(c, http.StatusOK, "schedule", page{Title: "Schedule " + sc.Name, Nav: "schedules", Data: toScheduleView(sc)})
}

// scheduleQuestions are the confirmation of each action on a schedule.
var scheduleQuestions = map[string]string{
	"pause":   "Pause schedule %q of tenant %s? It makes no run until resumed; the runs due meanwhile are recorded as missed (or, with catch_up last, the latest fires at the resume).",
	"resume":  "Resume schedule %q of tenant %s? It runs again from its next time.",
	"trigger": "Trigger schedule %q of tenant %s: make one run now?",
}

func (d *dashboard) confirmSchedule(c echo.Context) error {
	sc, ok, err := d.scheduleOf(c)
	if !ok {
		return err
	}
	action := c.QueryParam("action")
	q, known := scheduleQuestions[action]
	if !known {
		return d.fail(c, http.StatusBadRequest, "action: must be pause, resume or trigger")
	}
	return d.render(c, http.StatusOK, "confirm", page{Title: "Schedule " + sc.Name, Nav: "schedules", Data: confirmView{
		Question: fmt.Sprintf(q, sc.Name, sc.Tenant), Action: scheduleURL(sc.Tenant, sc.Name, "") + "/action",
		Fields: map[string]string{"action": action}, Back: scheduleURL(sc.Tenant, sc.Name, ""),
	}})
}

func (d *dashboard) scheduleAction(c echo.Context) error {
	tenant, name, err := scheduleNames(c)
	if err != nil {
		return d.fail(c, http.StatusBadRequest, "%s", err)
	}
	ctx := c.Request().Context()
	action := c.FormValue("action")
	switch action {
	case "pause":
		_, err = d.q.PauseSchedule(ctx, tenant, name)
	case "resume":
		_, err = d.q.ResumeSchedule(ctx, tenant, name)
	case "trigger":
		_, err = d.q.TriggerSchedule(ctx, tenant, name)
	default:
		return d.fail(c, http.StatusBadRequest, "action: must be pause, resume or trigger")
	}
	if errors.Is(err, queuer.ErrScheduleNotFound) {
		return d.fail(c, http.StatusNotFound, "no schedule %q in tenant %s", name, tenant)
	}
	if err != nil {
		return err
	}
	d.log.InfoContext(ctx, "dashboard action", "action", action+"_schedule", "tenant", tenant, "schedule", name)
	return c.Redirect(http.StatusSeeOther, scheduleURL(tenant, name, ""))
}
