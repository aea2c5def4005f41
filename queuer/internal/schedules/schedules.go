// Package schedules owns the schedules of tenants (DESIGN.md §3 "Work that starts itself"):
// their definitions (the table opsq.schedules), their runs (opsq.schedule_runs, the last
// RunsKept of each), and the Firer, the loop on every instance that makes the runs that are
// due. Every run makes one submission across all instances: an instance fires a due run
// under a short lease in the database (by the database's clock), and the submission's
// idempotency key (schedule:<name>:<scheduled time>, unless the template sets one) makes a
// run fired twice — its instance killed or stopped after submitting, the lease taken over
// — the one submission.
//
// It does not check a template as a submission body (the API does, before Create), nor
// insert submissions itself: it hands each run to its Submitter (the submissions store).
package schedules

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/robfig/cron/v3"

	"opsq/queuer/internal/submissions"
)

// Bounds of a schedule (DESIGN.md §3).
const (
	// NameMax is the longest name of a schedule, in bytes.
	NameMax = 128
	// PerTenantMax is how many schedules a tenant may have.
	PerTenantMax = 1000
	// TemplateMax bounds a schedule's submission template, in bytes of JSON.
	TemplateMax = 1 << 20
	// BackfillMax is how many runs one backfill makes at most.
	BackfillMax = 1000
	// RunsKept is how many runs of a schedule are kept (those recorded last).
	RunsKept = 100
	// NextRunsShown is how many next run times a schedule's answer lists.
	NextRunsShown = 3
)

// The bounds of the rendered text fields of a run's submission, the API's (api/wire).
const (
	idempotencyKeyMax = 256
	prefixMax         = 1 << 10
	metadataMax       = 64 << 10
)

// The values of Def.Overlap and Def.CatchUp.
const (
	OverlapSkip           = "skip"
	OverlapAllow          = "allow"
	OverlapCancelPrevious = "cancel_previous"
	CatchUpNone           = "none"
	CatchUpLast           = "last"
)

// The outcomes of a run.
const (
	RunSubmitted = "submitted"
	RunSkipped   = "skipped"
	RunMissed    = "missed"
	RunFailed    = "failed"
)

// FieldError is a definition that cannot be: Field names what is wrong (cron, timezone,
// name, overlap, catch_up, submission.prefix, …).
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldError(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Errors callers branch on.
var (
	// ErrNotFound: no schedule of that name in the tenant.
	ErrNotFound = errors.New("no such schedule")
	// ErrExists: the tenant has a schedule of that name already.
	ErrExists = errors.New("a schedule of that name exists already")
	// ErrTooMany: the tenant has PerTenantMax schedules.
	ErrTooMany = fmt.Errorf("the tenant has %d schedules, the most it may have", PerTenantMax)
)

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Timing is when a schedule runs: its cron schedule in its time zone.
type Timing struct {
	schedule cron.Schedule
	loc      *time.Location
}

// ParseTiming reads a cron expression (5 fields, 6 with seconds first, or a descriptor
// such as @hourly or @every 30s; at most one run a second) and an IANA time zone ("" is
// UTC).
func ParseTiming(spec, timezone string) (Timing, error) {
	loc := time.UTC
	if timezone != "" {
		if timezone == "Local" || strings.ContainsRune(timezone, 0) {
			return Timing{}, fieldError("timezone", "%q is not an IANA time zone name such as \"Europe/Amsterdam\" or \"UTC\"", timezone)
		}
		l, err := time.LoadLocation(timezone)
		if err != nil {
			return Timing{}, fieldError("timezone", "%q is not an IANA time zone name such as \"Europe/Amsterdam\" or \"UTC\"", timezone)
		}
		loc = l
	}
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Timing{}, fieldError("cron", "required: 5 fields (\"0 2 * * *\"), 6 with seconds first, or a descriptor (\"@hourly\", \"@every 30s\")")
	}
	if len(spec) > 256 {
		return Timing{}, fieldError("cron", "longer than 256 bytes")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return Timing{}, fieldError("cron", "give the time zone in timezone, not in the expression")
	}
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(every))
		if err != nil {
			return Timing{}, fieldError("cron", "@every takes a duration such as \"30s\" (%v)", err)
		}
		if d < time.Second || d%time.Second != 0 {
			return Timing{}, fieldError("cron", "@every %s: a schedule runs at most once a second, at whole seconds (such as \"@every 1s\" or \"@every 90s\")", d)
		}
	}
	s, err := parser.Parse(spec)
	if err != nil {
		return Timing{}, fieldError("cron", "%q: %v", spec, err)
	}
	t := Timing{schedule: s, loc: loc}
	if t.Next(time.Now()).IsZero() {
		return Timing{}, fieldError("cron", "%q never runs", spec)
	}
	return t, nil
}

// Next is the first run strictly after t (zero if none within five years), in UTC.
//
// Daylight saving time, as Vixie cron has it for jobs at a fixed hour (an hour field that
// is not "*": "30 2 * * *", @daily): a local time the clocks skip (02:30 on the night they
// go forward in Europe/Amsterdam) runs once, at the instant the clocks jump (03:00 local
// time); a local time that comes twice (02:30 on the night they go back) runs once, the
// first time. robfig/cron alone makes no run that night in spring and two in autumn.
// Schedules whose hour is "*" ("0 * * * *", "*/10 * * * * *") and @every ones follow real
// time: a run every hour that passes, whatever the clocks say.
func (t Timing) Next(after time.Time) time.Time {
	spec, fixedHour := t.schedule.(*cron.SpecSchedule)
	fixedHour = fixedHour && spec.Hour&starBit == 0
	for {
		n := t.schedule.Next(after.In(t.loc))
		if n.IsZero() || !fixedHour {
			return n.UTC()
		}
		if jump := t.skippedRun(after, n); !jump.IsZero() {
			return jump.UTC()
		}
		if !t.secondOccurrence(n) {
			return n.UTC()
		}
		after = n // the wall time ran already, an hour earlier
	}
}

// starBit is robfig/cron's mark of a field given as "*".
const starBit = 1 << 63

// skippedRun is the first instant in (after, n) at which the clocks jumped forward over a
// local time the schedule names, or zero if none.
func (t Timing) skippedRun(after, n time.Time) time.Time {
	for at := after.In(t.loc); ; {
		_, end := at.ZoneBounds()
		if end.IsZero() || !end.Before(n) {
			return time.Time{}
		}
		_, before := end.Add(-time.Nanosecond).Zone()
		_, afterOff := end.Zone()
		if gap := time.Duration(afterOff-before) * time.Second; gap > 0 {
			// The local times skipped are those of [end, end+gap) at the offset before.
			old := time.FixedZone("", before)
			if m := t.schedule.Next(end.Add(-time.Nanosecond).In(old)); !m.IsZero() && m.Before(end.Add(gap)) {
				return end
			}
		}
		at = end
	}
}

// secondOccurrence: n's local time came once already, before the clocks went back.
func (t Timing) secondOccurrence(n time.Time) bool {
	local := n.In(t.loc)
	start, _ := local.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, now := local.Zone()
	_, before := start.Add(-time.Nanosecond).Zone()
	back := time.Duration(before-now) * time.Second
	if back <= 0 {
		return false
	}
	// The same wall time at the earlier offset, if that instant was before the change.
	first := n.Add(-back)
	return first.Before(start) && first.In(t.loc).Format(time.DateTime) == local.Format(time.DateTime)
}

// NextN is the next n runs after t.
func (t Timing) NextN(after time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		after = t.Next(after)
		if after.IsZero() {
			break
		}
		out = append(out, after)
	}
	return out
}

// Location is the schedule's time zone.
func (t Timing) Location() *time.Location { return t.loc }

// templateData is what a template's fields may name: {{.Time}} and {{.Date}}.
type templateData struct {
	Time string
	Date string
}

func dataAt(at time.Time, loc *time.Location) templateData {
	local := at.In(loc)
	return templateData{Time: local.Format(time.RFC3339), Date: local.Format(time.DateOnly)}
}

// render renders one field's template for the run at at.
func render(field, text string, at time.Time, loc *time.Location) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	tm, err := template.New(field).Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fieldError(field, "the template does not parse: %v", err)
	}
	var b bytes.Buffer
	if err := tm.Execute(&b, dataAt(at, loc)); err != nil {
		return "", fieldError(field, "the template names what it may not ({{.Time}} and {{.Date}} only): %v", err)
	}
	return b.String(), nil
}

// Plan is a schedule's submission as the engine makes it at each run: the submission (its
// Prefix, Metadata and IdempotencyKey templates of {{.Time}} and {{.Date}}), its inline
// chunks, and NotBeforeDelay, a not_before given as a duration (from the run's time).
type Plan struct {
	Submission     submissions.NewSubmission
	Chunks         []string
	NotBeforeDelay time.Duration
}

// Render is what the run at at submits. field names the templates as "submission.<field>".
func (p Plan) Render(at time.Time, loc *time.Location) (submissions.NewSubmission, error) {
	sub := p.Submission
	// Absent JSON fields come back from the stored plan as the text null.
	if string(sub.StrategicMetadata) == "null" {
		sub.StrategicMetadata = nil
	}
	if string(sub.Lifecycle.OnFailure) == "null" {
		sub.Lifecycle.OnFailure = nil
	}
	var err error
	if sub.Prefix, err = render("submission.prefix", sub.Prefix, at, loc); err != nil {
		return sub, err
	}
	if sub.Metadata, err = render("submission.metadata", sub.Metadata, at, loc); err != nil {
		return sub, err
	}
	if sub.IdempotencyKey, err = render("submission.idempotency_key", sub.IdempotencyKey, at, loc); err != nil {
		return sub, err
	}
	switch {
	case len(sub.IdempotencyKey) > idempotencyKeyMax:
		return sub, fieldError("submission.idempotency_key", "%d bytes once rendered, over %d", len(sub.IdempotencyKey), idempotencyKeyMax)
	case len(sub.Prefix) > prefixMax:
		return sub, fieldError("submission.prefix", "%d bytes once rendered, over %d", len(sub.Prefix), prefixMax)
	case len(sub.Metadata) > metadataMax:
		return sub, fieldError("submission.metadata", "%d bytes once rendered, over %d", len(sub.Metadata), metadataMax)
	}
	if p.NotBeforeDelay > 0 {
		sub.Lifecycle.NotBefore = at.Add(p.NotBeforeDelay)
	}
	return sub, nil
}

// CheckTemplate checks that the template fields of a submission parse and name only
// {{.Time}} and {{.Date}}, and returns them rendered for the run at at (for the caller to
// check as a submission's fields).
func CheckTemplate(prefix, metadata, idempotencyKey string, at time.Time, loc *time.Location) (string, string, string, error) {
	p := Plan{Submission: submissions.NewSubmission{Prefix: prefix, Metadata: metadata, IdempotencyKey: idempotencyKey}}
	sub, err := p.Render(at, loc)
	return sub.Prefix, sub.Metadata, sub.IdempotencyKey, err
}

// CheckName checks a schedule's name: 1 to NameMax bytes of UTF-8 without control
// characters or "/".
func CheckName(name string) error {
	if name == "" || len(name) > NameMax {
		return fieldError("name", "must be 1 to %d bytes", NameMax)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == 0xfffd {
			return fieldError("name", "must be UTF-8 text without control characters or \"/\"")
		}
	}
	return nil
}

// idempotencyKey is the key of the run at at of schedule name, unless its template sets one.
func idempotencyKey(name string, at time.Time) string {
	return "schedule:" + name + ":" + at.UTC().Format(time.RFC3339Nano)
}
