package schedules

import (
	"errors"
	"testing"
	"time"
)

// TestParseTiming: the cron forms a schedule takes (5 fields, 6 with seconds, descriptors,
// @every of whole seconds) and those it refuses, each naming its field; next runs in the
// schedule's time zone.
func TestParseTiming(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 28, 23, 30, 0, 0, time.UTC) // 00:30 on the 29th in Amsterdam, before the DST change
	for _, c := range []struct {
		name, cron, tz string
		field          string      // "" when it parses
		next           []time.Time // the next runs after from, when it parses
	}{
		{name: "five fields", cron: "0 2 * * *", tz: "Europe/Amsterdam",
			// 02:00 does not exist on the 29th in Amsterdam (the clocks skip to 03:00):
			// the run is made when they jump, 01:00 UTC (TestTimingDST).
			next: []time.Time{time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 30, 0, 0, 0, 0, time.UTC)}},
		{name: "six fields", cron: "*/20 * * * * *", next: []time.Time{from.Add(20 * time.Second), from.Add(40 * time.Second)}},
		{name: "descriptor", cron: "@hourly", next: []time.Time{from.Add(30 * time.Minute), from.Add(90 * time.Minute)}},
		{name: "every second", cron: "@every 1s", next: []time.Time{from.Add(time.Second), from.Add(2 * time.Second)}},
		{name: "every 90s", cron: "@every 90s", next: []time.Time{from.Add(90 * time.Second), from.Add(180 * time.Second)}},
		{name: "under a second", cron: "@every 500ms", field: "cron"},
		{name: "not whole seconds", cron: "@every 1500ms", field: "cron"},
		{name: "bad duration", cron: "@every soon", field: "cron"},
		{name: "empty", cron: "", field: "cron"},
		{name: "seven fields", cron: "0 0 0 * * * *", field: "cron"},
		{name: "out of range", cron: "61 * * * *", field: "cron"},
		{name: "TZ prefix", cron: "CRON_TZ=UTC 0 2 * * *", field: "cron"},
		{name: "never", cron: "0 0 30 2 *", field: "cron"},
		{name: "unknown zone", cron: "@hourly", tz: "Mars/Olympus", field: "timezone"},
		{name: "Local", cron: "@hourly", tz: "Local", field: "timezone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			timing, err := ParseTiming(c.cron, c.tz)
			var fe *FieldError
			switch {
			case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
				t.Fatalf("ParseTiming(%q, %q) = %v; want an error naming %s", c.cron, c.tz, err, c.field)
			case c.field != "":
				return
			case err != nil:
				t.Fatalf("ParseTiming(%q, %q): %v", c.cron, c.tz, err)
			}
			got := timing.NextN(from, len(c.next))
			for i := range c.next {
				if i >= len(got) || !got[i].Equal(c.next[i]) {
					t.Fatalf("next runs %v; want %v", got, c.next)
				}
			}
		})
	}
}

// TestRender: {{.Time}} and {{.Date}} in the schedule's time zone; a template that does not
// parse or names another field is an error naming submission.<field>; a rendered field
// over its bound too; a not_before delay counts from the run.
func TestRender(t *testing.T) {
	t.Parallel()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
	p := Plan{NotBeforeDelay: time.Hour}
	p.Submission.Prefix, p.Submission.Metadata, p.Submission.IdempotencyKey = "s3://b/{{.Date}}/", "at {{.Time}}", "k-{{.Date}}"
	sub, err := p.Render(at, tokyo)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Prefix != "s3://b/2026-03-02/" || sub.Metadata != "at 2026-03-02T08:30:00+09:00" || sub.IdempotencyKey != "k-2026-03-02" {
		t.Errorf("rendered %q, %q, %q; want the date and time in Tokyo", sub.Prefix, sub.Metadata, sub.IdempotencyKey)
	}
	if !sub.Lifecycle.NotBefore.Equal(at.Add(time.Hour)) {
		t.Errorf("not_before %s; want an hour after the run", sub.Lifecycle.NotBefore)
	}
	for _, c := range []struct{ prefix, metadata, key, field string }{
		{prefix: "{{.Time", field: "submission.prefix"},
		{metadata: "{{.Host}}", field: "submission.metadata"},
		{key: "{{range .}}{{end}}", field: "submission.idempotency_key"},
		{key: string(make([]byte, 250)) + "{{.Time}}", field: "submission.idempotency_key"},
	} {
		_, _, _, err := CheckTemplate(c.prefix, c.metadata, c.key, at, time.UTC)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("CheckTemplate(%q, %q, %q) = %v; want an error naming %s", c.prefix, c.metadata, c.key, err, c.field)
		}
	}
}

// TestTimingDST: in Europe/Amsterdam a run at a fixed hour whose local time is skipped
// when the clocks go forward (2026-03-29 02:00 → 03:00) is made once, when they jump; one
// whose local time comes twice when they go back (2026-10-25 03:00 → 02:00) is made once,
// the first time; a schedule whose hour is "*" and an @every one follow real time.
func TestTimingDST(t *testing.T) {
	t.Parallel()
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2026, mo, d, h, m, 0, 0, time.UTC) }
	spring, autumn := utc(3, 28, 23, 0), utc(10, 24, 23, 0)
	for _, c := range []struct {
		name, cron string
		from       time.Time
		next       []time.Time
	}{
		{"skipped 02:30", "30 2 * * *", spring, []time.Time{utc(3, 29, 1, 0), utc(3, 30, 0, 30), utc(3, 31, 0, 30)}},
		{"skipped 02:00, seconds", "0 0 2 * * *", spring, []time.Time{utc(3, 29, 1, 0), utc(3, 30, 0, 0)}},
		{"not skipped 03:30", "30 3 * * *", spring, []time.Time{utc(3, 29, 1, 30), utc(3, 30, 1, 30)}},
		{"hours 1-3, spring", "30 1-3 * * *", spring, []time.Time{utc(3, 29, 0, 30), utc(3, 29, 1, 0), utc(3, 29, 1, 30), utc(3, 29, 23, 30)}},
		{"twice 02:30", "30 2 * * *", autumn, []time.Time{utc(10, 25, 0, 30), utc(10, 26, 1, 30), utc(10, 27, 1, 30)}},
		{"hours 1-3, autumn", "30 1-3 * * *", autumn, []time.Time{utc(10, 24, 23, 30), utc(10, 25, 0, 30), utc(10, 25, 2, 30), utc(10, 26, 0, 30)}},
		{"hourly, spring", "0 * * * *", spring, []time.Time{utc(3, 29, 0, 0), utc(3, 29, 1, 0), utc(3, 29, 2, 0)}},
		{"hourly, autumn", "0 * * * *", autumn, []time.Time{utc(10, 25, 0, 0), utc(10, 25, 1, 0), utc(10, 25, 2, 0)}},
		{"every hour", "@every 1h", autumn, []time.Time{utc(10, 25, 0, 0), utc(10, 25, 1, 0), utc(10, 25, 2, 0)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			timing, err := ParseTiming(c.cron, "Europe/Amsterdam")
			if err != nil {
				t.Fatal(err)
			}
			got := timing.NextN(c.from, len(c.next))
			for i := range c.next {
				if i >= len(got) || !got[i].Equal(c.next[i]) {
					t.Fatalf("next runs %v; want %v", got, c.next)
				}
			}
		})
	}
}
