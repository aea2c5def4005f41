package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"opsq/api/wire"
)

// Schedules (DESIGN.md §3 "Work that starts itself"): submissions that start themselves on
// a cron schedule, each run once across all instances. A producer key manages its
// tenant's; an admin key names the tenant (ScheduleRequest.Tenant, or the tenant argument
// of the calls by name; "" is "default", and for Schedules every tenant).

// CreateSchedule makes a schedule and returns it with its next 3 run times. A name in use
// is an *Error with status 409 (code already_exists).
func (c *Client) CreateSchedule(ctx context.Context, req wire.ScheduleRequest) (wire.Schedule, error) {
	var out wire.Schedule
	err := c.postJSON(ctx, "/v1/schedules", req, &out)
	return out, err
}

// ReplaceSchedule replaces the definition of schedule name (PUT); its runs so far stay.
func (c *Client) ReplaceSchedule(ctx context.Context, name string, req wire.ScheduleRequest) (wire.Schedule, error) {
	path, err := schedulePath(name, "")
	if err != nil {
		return wire.Schedule{}, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return wire.Schedule{}, fmt.Errorf("opsq: encoding %s: %w", path, err)
	}
	var out wire.Schedule
	err = c.call(ctx, http.MethodPut, path, tenantQuery(req.Tenant), "application/json", bytes.NewReader(body), &out)
	return out, err
}

// Schedule returns schedule name with its next run times and its last runs.
func (c *Client) Schedule(ctx context.Context, tenant, name string) (wire.Schedule, error) {
	path, err := schedulePath(name, "")
	if err != nil {
		return wire.Schedule{}, err
	}
	var out wire.Schedule
	err = c.call(ctx, http.MethodGet, path, tenantQuery(tenant), "", nil, &out)
	return out, err
}

// Schedules lists the schedules of the key's tenant (an admin key's of tenant, or of every
// tenant for "").
func (c *Client) Schedules(ctx context.Context, tenant string) (wire.ScheduleList, error) {
	var out wire.ScheduleList
	err := c.call(ctx, http.MethodGet, "/v1/schedules", tenantQuery(tenant), "", nil, &out)
	return out, err
}

// DeleteSchedule deletes schedule name and its runs (their submissions stay).
func (c *Client) DeleteSchedule(ctx context.Context, tenant, name string) error {
	path, err := schedulePath(name, "")
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodDelete, path, tenantQuery(tenant), "", nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp.Body.Close()
}

// PauseSchedule makes no run of schedule name until ResumeSchedule.
func (c *Client) PauseSchedule(ctx context.Context, tenant, name string) (wire.Schedule, error) {
	return c.postSchedule(ctx, tenant, name, "/pause")
}

// ResumeSchedule makes a paused schedule run again from its next time after now.
func (c *Client) ResumeSchedule(ctx context.Context, tenant, name string) (wire.Schedule, error) {
	return c.postSchedule(ctx, tenant, name, "/resume")
}

func (c *Client) postSchedule(ctx context.Context, tenant, name, suffix string) (wire.Schedule, error) {
	path, err := schedulePath(name, suffix)
	if err != nil {
		return wire.Schedule{}, err
	}
	var out wire.Schedule
	err = c.call(ctx, http.MethodPost, path, tenantQuery(tenant), "", nil, &out)
	return out, err
}

// TriggerSchedule makes one run of schedule name now and returns it.
func (c *Client) TriggerSchedule(ctx context.Context, tenant, name string) (wire.ScheduleRun, error) {
	path, err := schedulePath(name, "/trigger")
	if err != nil {
		return wire.ScheduleRun{}, err
	}
	var out wire.ScheduleRun
	err = c.call(ctx, http.MethodPost, path, tenantQuery(tenant), "", nil, &out)
	return out, err
}

// BackfillSchedule makes the runs of schedule name scheduled from from to to (both
// included, at most 1 000), each once, and returns those it made.
func (c *Client) BackfillSchedule(ctx context.Context, tenant, name string, from, to time.Time) ([]wire.ScheduleRun, error) {
	path, err := schedulePath(name, "/backfill")
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(wire.BackfillRequest{From: from, To: to})
	if err != nil {
		return nil, fmt.Errorf("opsq: encoding %s: %w", path, err)
	}
	var out wire.ScheduleRuns
	err = c.call(ctx, http.MethodPost, path, tenantQuery(tenant), "application/json", bytes.NewReader(body), &out)
	return out.Runs, err
}

func schedulePath(name, suffix string) (string, error) {
	if name == "" {
		return "", errors.New("opsq: empty schedule name")
	}
	return "/v1/schedules/" + url.PathEscape(name) + suffix, nil
}

func tenantQuery(tenant string) url.Values {
	if tenant == "" {
		return nil
	}
	return url.Values{"tenant": {tenant}}
}
