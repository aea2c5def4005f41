package wire

import (
	"encoding/json"
	"time"
)

// Schedules (DESIGN.md §3 "Work that starts itself").

// ScheduleRequest is the body of POST /v1/schedules and PUT /v1/schedules/{name} (whose
// name is the path's; a name in the body must be the same). Submission is a submission
// body without after, whose prefix, metadata and idempotency_key may hold {{.Time}} and
// {{.Date}}. Tenant is for admin keys (and OPSQ_AUTH=off) only.
type ScheduleRequest struct {
	Name       string          `json:"name,omitempty"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone,omitempty"`
	Submission json.RawMessage `json:"submission"`
	Overlap    string          `json:"overlap,omitempty"`
	CatchUp    string          `json:"catch_up,omitempty"`
	Paused     bool            `json:"paused,omitempty"`
	Tenant     string          `json:"tenant,omitempty"`
}

// Schedule is a schedule as the API answers it: its definition, its next 3 run times and
// (GET of one) its last runs, the latest first.
type Schedule struct {
	Name             string          `json:"name"`
	Tenant           string          `json:"tenant"`
	Cron             string          `json:"cron"`
	Timezone         string          `json:"timezone"`
	Submission       json.RawMessage `json:"submission"`
	Overlap          string          `json:"overlap"`
	CatchUp          string          `json:"catch_up"`
	Paused           bool            `json:"paused"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
	LastSubmissionID *string         `json:"last_submission_id"`
	NextRuns         []time.Time     `json:"next_runs"`
	LastRuns         []ScheduleRun   `json:"last_runs,omitempty"`
}

// ScheduleRun is one run of a schedule: its scheduled time, what it did (submitted with
// its submission's id, skipped, missed, or failed with why, after attempts) and when.
type ScheduleRun struct {
	ScheduledAt  time.Time `json:"scheduled_at"`
	Outcome      string    `json:"outcome"`
	SubmissionID string    `json:"submission_id,omitempty"`
	Error        string    `json:"error,omitempty"`
	Attempts     int       `json:"attempts"`
	At           time.Time `json:"at"`
}

// ScheduleList is the answer of GET /v1/schedules: Truncated when more schedules exist
// than the page holds (an admin's list of every tenant; name a tenant).
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
	Truncated bool       `json:"truncated"`
}

// BackfillRequest is the body of POST /v1/schedules/{name}/backfill: the runs scheduled
// from From to To, both included.
type BackfillRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// ScheduleRuns is the answer of a backfill: the runs it made (those submitted before are
// passed over).
type ScheduleRuns struct {
	Runs []ScheduleRun `json:"runs"`
}
