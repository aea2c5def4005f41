package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"opsq/api/wire"
)

// This file holds "opsq schedules": the schedules of a tenant (DESIGN.md §3 "Work that
// starts itself"), over /v1/schedules.

const schedulesAbout = `Manage schedules: submissions that start themselves on a cron schedule, each run made once
across all instances (within a second of its time).

  create NAME --cron EXPR --submission JSON|@FILE [--timezone TZ] [--overlap skip|allow|cancel_previous]
         [--catch-up none|last] [--paused]
  replace NAME (the same flags as create: the definition is replaced, its runs stay)
  list                          the schedules, with their next run
  show NAME                     a schedule, its next 3 runs and its last runs
  pause NAME | resume NAME      stop and start its runs (resume goes on from its next time)
  trigger NAME                  make one run now
  backfill NAME --from T --to T make the runs scheduled from T to T (RFC 3339), each once
  delete NAME

--cron is robfig/cron's syntax: 5 fields ("0 2 * * *"), 6 with seconds first, or a
descriptor ("@hourly", "@every 30s"). --submission is a submission body (JSON, or @FILE to
read it from FILE, @- from standard input) whose prefix, metadata and idempotency_key may
hold {{.Time}} (the run's scheduled time) and {{.Date}} (its date in --timezone).
--tenant is for admin keys (a producer key's schedules are its tenant's).`

func runSchedules(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("schedules", "create|replace|list|show|pause|resume|trigger|backfill|delete [NAME]", schedulesAbout, stderr)
	var req wire.ScheduleRequest
	var submission, from, to string
	var asJSON bool
	fs.StringVar(&req.Cron, "cron", "", "create, replace: when it runs, a cron `expression`")
	fs.StringVar(&req.Timezone, "timezone", "", "create, replace: an IANA time `zone` (default UTC)")
	fs.StringVar(&submission, "submission", "", "create, replace: the submission body, `JSON` or @FILE (@- standard input)")
	fs.StringVar(&req.Overlap, "overlap", "", "create, replace: skip (default), allow or cancel_previous")
	fs.StringVar(&req.CatchUp, "catch-up", "", "create, replace: none (default) or last")
	fs.BoolVar(&req.Paused, "paused", false, "create, replace: make it paused")
	fs.StringVar(&req.Tenant, "tenant", "", "the `tenant` (admin keys)")
	fs.StringVar(&from, "from", "", "backfill: the first scheduled `time` (RFC 3339)")
	fs.StringVar(&to, "to", "", "backfill: the last scheduled `time` (RFC 3339)")
	fs.BoolVar(&asJSON, "json", false, "print the answer as JSON")
	pos, err := fs.parse(args, 1, 2)
	if err != nil {
		return err
	}
	action, name := pos[0], ""
	if len(pos) == 2 {
		name = pos[1]
	}
	switch {
	case action == "list" && name != "":
		return fs.usageError("list takes no NAME")
	case action != "list" && name == "":
		return fs.usageError("%s needs the schedule's NAME", action)
	}
	c, tenant := fs.client(), req.Tenant
	show := func(v any, text func()) error {
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(v)
		}
		text()
		return nil
	}
	switch action {
	case "create", "replace":
		if req.Cron == "" {
			return fs.usageError("--cron: when the schedule runs, such as \"0 2 * * *\" or \"@every 1h\"")
		}
		if submission == "" {
			return fs.usageError("--submission: the submission each run makes, JSON or @FILE")
		}
		if req.Submission, err = readSubmissionTemplate(submission); err != nil {
			return fs.usageError("--submission: %v", err)
		}
		var sc wire.Schedule
		if action == "create" {
			req.Name = name
			sc, err = c.CreateSchedule(ctx, req)
		} else {
			sc, err = c.ReplaceSchedule(ctx, name, req)
		}
		if err != nil {
			return explain(err, fs.url, "")
		}
		return show(sc, func() { printSchedule(stdout, sc) })
	case "list":
		list, err := c.Schedules(ctx, tenant)
		if err != nil {
			return explain(err, fs.url, "")
		}
		return show(list, func() {
			w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tTENANT\tCRON\tTIMEZONE\tSTATE\tNEXT RUN")
			for _, sc := range list.Schedules {
				next := "-"
				if len(sc.NextRuns) > 0 {
					next = sc.NextRuns[0].Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", sc.Name, sc.Tenant, sc.Cron, sc.Timezone, scheduleState(sc), next)
			}
			w.Flush()
			if list.Truncated {
				fmt.Fprintln(stdout, "(more schedules exist: give --tenant)")
			}
		})
	case "show":
		sc, err := c.Schedule(ctx, tenant, name)
		if err != nil {
			return explain(err, fs.url, "")
		}
		return show(sc, func() { printSchedule(stdout, sc) })
	case "pause", "resume":
		verb := c.PauseSchedule
		if action == "resume" {
			verb = c.ResumeSchedule
		}
		sc, err := verb(ctx, tenant, name)
		if err != nil {
			return explain(err, fs.url, "")
		}
		return show(sc, func() { fmt.Fprintf(stdout, "schedule %s %s\n", name, scheduleState(sc)) })
	case "trigger":
		run, err := c.TriggerSchedule(ctx, tenant, name)
		if err != nil {
			return explain(err, fs.url, "")
		}
		return show(run, func() { printRuns(stdout, []wire.ScheduleRun{run}) })
	case "backfill":
		var times [2]time.Time
		for i, v := range []struct{ flag, value string }{{"from", from}, {"to", to}} {
			t, err := time.Parse(time.RFC3339, v.value)
			if err != nil {
				return fs.usageError("--%s: an RFC 3339 time such as 2026-01-02T02:00:00Z", v.flag)
			}
			times[i] = t
		}
		runs, err := c.BackfillSchedule(ctx, tenant, name, times[0], times[1])
		if err != nil {
			return explain(err, fs.url, "")
		}
		return show(wire.ScheduleRuns{Runs: runs}, func() {
			printRuns(stdout, runs)
			fmt.Fprintf(stdout, "%d %s made (those submitted before are passed over)\n", len(runs), plural(len(runs), "run", "runs"))
		})
	case "delete":
		if err := c.DeleteSchedule(ctx, tenant, name); err != nil {
			return explain(err, fs.url, "")
		}
		fmt.Fprintf(stdout, "schedule %s deleted\n", name)
		return nil
	}
	return fs.usageError("unknown action %q: create, replace, list, show, pause, resume, trigger, backfill or delete", action)
}

// readSubmissionTemplate reads --submission: JSON, or @FILE (@- standard input).
func readSubmissionTemplate(v string) (json.RawMessage, error) {
	var b []byte
	switch {
	case v == "@-":
		var err error
		if b, err = io.ReadAll(io.LimitReader(os.Stdin, 2<<20)); err != nil {
			return nil, err
		}
	case strings.HasPrefix(v, "@"):
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, err
		}
	default:
		b = []byte(v)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("not JSON: %.60q", b)
	}
	return json.RawMessage(b), nil
}

func scheduleState(sc wire.Schedule) string {
	if sc.Paused {
		return "paused"
	}
	return "active"
}

func printSchedule(w io.Writer, sc wire.Schedule) {
	fmt.Fprintf(w, "schedule %s (tenant %s): %s in %s, %s, overlap %s, catch_up %s\n", sc.Name, sc.Tenant, sc.Cron, sc.Timezone,
		scheduleState(sc), sc.Overlap, sc.CatchUp)
	for _, t := range sc.NextRuns {
		fmt.Fprintf(w, "  next run  %s\n", t.Format(time.RFC3339))
	}
	if len(sc.LastRuns) > 0 {
		printRuns(w, sc.LastRuns)
	}
}

func printRuns(w io.Writer, runs []wire.ScheduleRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULED\tOUTCOME\tSUBMISSION\tAT\tWHY")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ScheduledAt.Format(time.RFC3339), r.Outcome, cmpOr(r.SubmissionID, "-"),
			r.At.Format(time.RFC3339), r.Error)
	}
	tw.Flush()
}

func cmpOr(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}
