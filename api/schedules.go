package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
)

// Schedules (DESIGN.md §3 "Work that starts itself"): producers and admins manage their
// tenant's schedules; consumers cannot (Routes). A producer key's schedules are its
// tenant's; an admin key names the tenant with the body's tenant or ?tenant= (default
// "default"), and lists every tenant's without one.

// scheduleTenant is the tenant a request on schedules acts in.
func scheduleTenant(c echo.Context, named string) (string, error) {
	named = cmp.Or(named, c.QueryParam("tenant"))
	if named != "" {
		if err := queuer.CheckTenant(named); err != nil {
			return "", badRequest("tenant: %v", err)
		}
	}
	t, err := submitTenant(c, named)
	return cmp.Or(t, queuer.TenantDefault), err
}

// createSchedule is POST /v1/schedules.
func (s *server) createSchedule(c echo.Context) error {
	def, err := s.scheduleDef(c, "")
	if err != nil {
		return err
	}
	sc, err := s.q.CreateSchedule(c.Request().Context(), def)
	if err != nil {
		return scheduleError(err, def.Name)
	}
	return c.JSON(http.StatusCreated, wireSchedule(sc))
}

// replaceSchedule is PUT /v1/schedules/{name}.
func (s *server) replaceSchedule(c echo.Context) error {
	def, err := s.scheduleDef(c, scheduleName(c))
	if err != nil {
		return err
	}
	sc, err := s.q.ReplaceSchedule(c.Request().Context(), def)
	if err != nil {
		return scheduleError(err, def.Name)
	}
	return c.JSON(http.StatusOK, wireSchedule(sc))
}

// scheduleDef reads and checks a schedule's body; path is the name in the path ("" for
// POST).
func (s *server) scheduleDef(c echo.Context, path string) (queuer.ScheduleDef, error) {
	var body wire.ScheduleRequest
	raw, err := s.readBody(c)
	if err != nil {
		return queuer.ScheduleDef{}, err
	}
	if len(raw) > queuer.ScheduleTemplateMax+64<<10 {
		return queuer.ScheduleDef{}, tooLarge("submission: the template is over its %d-byte limit (large batches use object-storage mode: prefix and chunk_count)", queuer.ScheduleTemplateMax)
	}
	if err := decodeJSON(raw, &body); err != nil {
		return queuer.ScheduleDef{}, err
	}
	if path != "" {
		if body.Name != "" && body.Name != path {
			return queuer.ScheduleDef{}, badRequest("name: %q is not the name in the path, %q (a schedule is not renamed)", body.Name, path)
		}
		body.Name = path
	}
	if err := queuer.CheckScheduleName(body.Name); err != nil {
		return queuer.ScheduleDef{}, badRequest("%v", err)
	}
	timing, err := queuer.ParseScheduleTiming(body.Cron, body.Timezone)
	if err != nil {
		return queuer.ScheduleDef{}, badRequest("%v", err)
	}
	tenant, err := scheduleTenant(c, body.Tenant)
	if err != nil {
		return queuer.ScheduleDef{}, err
	}
	plan, err := s.schedulePlan(body.Submission, timing)
	if err != nil {
		return queuer.ScheduleDef{}, err
	}
	return queuer.ScheduleDef{Tenant: tenant, Name: body.Name, Cron: body.Cron, Timezone: cmp.Or(body.Timezone, "UTC"),
		Template: string(body.Submission), Plan: plan, Overlap: body.Overlap, CatchUp: body.CatchUp, Paused: body.Paused,
		CreatedBy: createdBy(c)}, nil
}

// schedulePlan checks a schedule's submission template as a submission body (rendered
// for its next run) and makes the engine's plan of it. Its errors name
// submission.<field>.
func (s *server) schedulePlan(raw json.RawMessage, timing queuer.ScheduleTiming) (queuer.SchedulePlan, error) {
	var plan queuer.SchedulePlan
	if len(raw) == 0 || isNull(raw) {
		return plan, badRequest("submission: required, a submission body (without after) that each run submits")
	}
	if len(raw) > queuer.ScheduleTemplateMax {
		return plan, tooLarge("submission: %d bytes is over the %d-byte limit of a template (large batches use object-storage mode: prefix and chunk_count)", len(raw), queuer.ScheduleTemplateMax)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return plan, badRequest("submission: must be a JSON object, a submission body")
	}
	for _, name := range []string{"after", "after_policy", "tenant"} {
		if _, ok := fields[name]; ok {
			return plan, badRequest("submission.%s: not allowed in a schedule's submission (the schedule's tenant is its runs')", name)
		}
	}
	at := timing.Next(time.Now())
	texts := map[string]string{}
	for _, name := range []string{"prefix", "metadata", "idempotency_key"} {
		if v, ok := fields[name]; ok && !isNull(v) {
			var text string
			if err := json.Unmarshal(v, &text); err != nil {
				return plan, badRequest("submission.%s: must be a string", name)
			}
			texts[name] = text
		}
	}
	prefix, metadata, key, err := queuer.CheckScheduleTemplate(texts["prefix"], texts["metadata"], texts["idempotency_key"], at, timing.Location())
	if err != nil {
		return plan, badRequest("%v", err)
	}
	// As a run at its next time submits it.
	rendered := make(map[string]json.RawMessage, len(fields))
	for name, v := range fields {
		rendered[name] = v
	}
	for name, text := range map[string]string{"prefix": prefix, "metadata": metadata, "idempotency_key": key} {
		if _, ok := texts[name]; ok {
			rendered[name], _ = json.Marshal(text)
		}
	}
	if _, err := parseHeader(rendered, true, s.maxChunks(), at); err != nil {
		return plan, submissionField(err)
	}
	sub, err := parseHeader(fields, true, s.maxChunks(), at)
	if err != nil {
		return plan, submissionField(err)
	}
	if v, ok := fields["not_before"]; ok && !isNull(v) {
		var text string
		if json.Unmarshal(v, &text) == nil {
			if _, err := time.Parse(time.RFC3339, text); err != nil { // a duration: from each run's time
				plan.NotBeforeDelay, sub.Lifecycle.NotBefore = sub.Lifecycle.NotBefore.Sub(at), time.Time{}
			}
		}
	}
	if v, ok := fields["chunks"]; ok && !isNull(v) {
		var chunks []json.RawMessage
		if err := json.Unmarshal(v, &chunks); err != nil {
			return plan, badRequest("submission.chunks: must be an array of strings")
		}
		if int64(len(chunks)) > s.maxChunks() {
			return plan, badRequest("submission.chunks: more than the %d-chunk limit of a submission", s.maxChunks())
		}
		for i, ch := range chunks {
			var text *string
			if err := json.Unmarshal(ch, &text); err != nil || text == nil {
				return plan, badRequest("submission.chunks[%d]: must be a string", i)
			}
			if p := textProblem(ch); p != "" {
				return plan, badRequest("submission.chunks[%d]: %s", i, p)
			}
			if len(*text) > s.cfg.MaxChunkBytes {
				return plan, tooLarge("submission.chunks[%d]: %d bytes is over the %d-byte chunk limit (OPSQ_MAX_CHUNK_BYTES)", i, len(*text), s.cfg.MaxChunkBytes)
			}
			plan.Chunks = append(plan.Chunks, *text)
		}
	}
	plan.Submission = sub
	return plan, nil
}

// submissionField names a submission body's field as the template's: submission.<field>.
func submissionField(err error) error {
	var e *Error
	if errors.As(err, &e) {
		out := *e
		out.Message = "submission." + e.Message
		return &out
	}
	return err
}

// scheduleError maps the schedules' errors to their answers.
func scheduleError(err error, name string) error {
	var field *queuer.ScheduleFieldError
	switch {
	case errors.As(err, &field):
		return badRequest("%v", field)
	case errors.Is(err, queuer.ErrScheduleNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("name: no schedule %q in this tenant", name)}
	case errors.Is(err, queuer.ErrScheduleExists):
		return &Error{Status: http.StatusConflict, Code: "already_exists", Message: fmt.Sprintf("name: the tenant has a schedule %q already (PUT /v1/schedules/{name} replaces it)", name)}
	case errors.Is(err, queuer.ErrTooManySchedules):
		return &Error{Status: http.StatusConflict, Code: "too_many_schedules", Message: err.Error() + "; delete one first"}
	}
	return err
}

// listSchedules is GET /v1/schedules: a producer's tenant's, an admin's of ?tenant= (of
// every tenant without one), by tenant and name.
func (s *server) listSchedules(c echo.Context) error {
	named := c.QueryParam("tenant")
	if named != "" {
		if err := queuer.CheckTenant(named); err != nil {
			return badRequest("tenant: %v", err)
		}
	}
	tenant, err := submitTenant(c, named)
	if err != nil {
		return err
	}
	list, more, err := s.q.Schedules(c.Request().Context(), tenant, "", "")
	if err != nil {
		return err
	}
	out := wire.ScheduleList{Schedules: make([]wire.Schedule, 0, len(list)), Truncated: more}
	for _, sc := range list {
		out.Schedules = append(out.Schedules, wireSchedule(sc))
	}
	return c.JSON(http.StatusOK, out)
}

// getSchedule is GET /v1/schedules/{name}, with its last runs.
func (s *server) getSchedule(c echo.Context) error {
	tenant, err := scheduleTenant(c, "")
	if err != nil {
		return err
	}
	sc, err := s.q.Schedule(c.Request().Context(), tenant, scheduleName(c))
	if err != nil {
		return scheduleError(err, scheduleName(c))
	}
	out := wireSchedule(sc)
	out.LastRuns = make([]wire.ScheduleRun, 0, len(sc.LastRuns))
	for _, r := range sc.LastRuns {
		out.LastRuns = append(out.LastRuns, wireRun(r))
	}
	return c.JSON(http.StatusOK, out)
}

// deleteSchedule is DELETE /v1/schedules/{name} → 204.
func (s *server) deleteSchedule(c echo.Context) error {
	tenant, err := scheduleTenant(c, "")
	if err != nil {
		return err
	}
	if err := s.q.DeleteSchedule(c.Request().Context(), tenant, scheduleName(c)); err != nil {
		return scheduleError(err, scheduleName(c))
	}
	return c.NoContent(http.StatusNoContent)
}

// pauseSchedule is POST /v1/schedules/{name}/pause and, with resume, /resume.
func (s *server) pauseSchedule(resume bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		tenant, err := scheduleTenant(c, "")
		if err != nil {
			return err
		}
		verb := s.q.PauseSchedule
		if resume {
			verb = s.q.ResumeSchedule
		}
		sc, err := verb(c.Request().Context(), tenant, scheduleName(c))
		if err != nil {
			return scheduleError(err, scheduleName(c))
		}
		return c.JSON(http.StatusOK, wireSchedule(sc))
	}
}

// triggerSchedule is POST /v1/schedules/{name}/trigger: one run now.
func (s *server) triggerSchedule(c echo.Context) error {
	tenant, err := scheduleTenant(c, "")
	if err != nil {
		return err
	}
	run, err := s.q.TriggerSchedule(c.Request().Context(), tenant, scheduleName(c))
	if err != nil {
		return scheduleError(err, scheduleName(c))
	}
	return c.JSON(http.StatusOK, wireRun(run))
}

// backfillSchedule is POST /v1/schedules/{name}/backfill {"from", "to"}.
func (s *server) backfillSchedule(c echo.Context) error {
	var body struct {
		From *string `json:"from"`
		To   *string `json:"to"`
	}
	if err := s.decodeBody(c, &body); err != nil {
		return err
	}
	var times [2]time.Time
	for i, f := range []struct {
		name string
		v    *string
	}{{"from", body.From}, {"to", body.To}} {
		if f.v == nil {
			return badRequest("%s: required, an RFC 3339 time", f.name)
		}
		t, err := time.Parse(time.RFC3339, *f.v)
		if err != nil {
			return badRequest("%s: must be an RFC 3339 time such as \"2026-01-02T03:00:00Z\"", f.name)
		}
		times[i] = t
	}
	tenant, err := scheduleTenant(c, "")
	if err != nil {
		return err
	}
	runs, err := s.q.BackfillSchedule(c.Request().Context(), tenant, scheduleName(c), times[0], times[1])
	if err != nil {
		return scheduleError(err, scheduleName(c))
	}
	out := wire.ScheduleRuns{Runs: make([]wire.ScheduleRun, 0, len(runs))}
	for _, r := range runs {
		out.Runs = append(out.Runs, wireRun(r))
	}
	return c.JSON(http.StatusOK, out)
}

func wireSchedule(sc queuer.Schedule) wire.Schedule {
	out := wire.Schedule{Name: sc.Name, Tenant: sc.Tenant, Cron: sc.Cron, Timezone: sc.Timezone, Submission: sc.Template,
		Overlap: sc.Overlap, CatchUp: sc.CatchUp, Paused: sc.Paused, CreatedAt: sc.CreatedAt.UTC(), UpdatedAt: sc.UpdatedAt.UTC(),
		NextRuns: make([]time.Time, 0, len(sc.NextRuns))}
	if sc.LastSubmissionID != 0 {
		id := strconv.FormatInt(sc.LastSubmissionID, 10)
		out.LastSubmissionID = &id
	}
	for _, t := range sc.NextRuns {
		out.NextRuns = append(out.NextRuns, t.UTC())
	}
	return out
}

func wireRun(r queuer.ScheduleRun) wire.ScheduleRun {
	out := wire.ScheduleRun{ScheduledAt: r.ScheduledAt.UTC(), Outcome: r.Outcome, Error: r.Error, Attempts: r.Attempts, At: r.At.UTC()}
	if r.SubmissionID != 0 {
		out.SubmissionID = strconv.FormatInt(r.SubmissionID, 10)
	}
	return out
}

// scheduleName is the schedule named by the route's {name}, unescaped. Echo routes by the
// request's raw path when it has one (when the client escaped more than Go's default, as
// url.PathEscape does ";" and ","), and then leaves the parameter escaped; unescaped here,
// every name the API accepts (anything but "/" and control characters) is reachable at
// /v1/schedules/<url.PathEscape(name)>.
func scheduleName(c echo.Context) string {
	name := c.Param("name")
	if c.Request().URL.RawPath == "" {
		return name
	}
	if n, err := url.PathUnescape(name); err == nil {
		return n
	}
	return name
}
