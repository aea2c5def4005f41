package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/client"
)

// This file holds "opsq throttle": set a throttle of a strategic value, or lift one before
// its end (POST and DELETE /v1/throttle).

func runThrottle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newClientFlags("throttle", "KEY=VALUE --for D | --lift KEY=VALUE", `Throttle a strategic value, cluster-wide: no chunk of a submission whose strategic metadata
has KEY = VALUE (KEY @tenant: of the tenant VALUE) is handed out for --for (1s to 1h), as a
consumer does when its downstream says "slow down". A throttle set again keeps the later
end. With --lift KEY=VALUE instead, end its throttles at once, on every instance: a
consumer key limited to tenants lifts its tenants' only; any other consumer key, and an
admin key, lifts them in every tenant. VALUE=42 is the integer 42; VALUE='"42"' the string.`, stderr)
	d := fs.Duration("for", 0, "throttle for `D`, 1s to 1h, such as 30s or 10m")
	var lift *wire.ThrottleLift
	fs.Func("lift", "end the throttles of `KEY=VALUE` now instead of setting one", func(m string) error {
		k, v, err := keyValue(m)
		if err != nil {
			return err
		}
		lift = &wire.ThrottleLift{Key: k, Value: v}
		return nil
	})
	pos, err := fs.parse(args, 0, 1)
	if err != nil {
		return err
	}
	c := fs.client()
	if lift != nil {
		switch {
		case len(pos) > 0:
			return fs.usageError("--lift names the throttle to end: give no KEY=VALUE besides it")
		case isSet(fs.FlagSet, "for"):
			return fs.usageError("--for goes with a throttle to set, not with --lift")
		}
		n, err := c.LiftThrottle(ctx, lift.Key, lift.Value)
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound && apiErr.Code == "not_found" {
			return fmt.Errorf("%s; nothing to lift: it may have ended or been lifted already (the dashboard's overview lists the throttles in force)", apiErr.Message)
		}
		if err != nil {
			return explain(err, fs.url, "")
		}
		fmt.Fprintf(stdout, "%s = %s lifted (%d %s)\n", lift.Key, lift.Value, n, plural(n, "throttle", "throttles"))
		return nil
	}
	switch {
	case len(pos) == 0:
		return fs.usageError("give KEY=VALUE and --for to throttle, or --lift KEY=VALUE to lift")
	case !isSet(fs.FlagSet, "for"):
		return fs.usageError("--for: how long to throttle %s, 1s to 1h", pos[0])
	case *d < wire.MinThrottle || *d > wire.MaxThrottle:
		return fs.usageError("--for %s: want %s to %s", *d, wire.MinThrottle, wire.MaxThrottle)
	}
	k, v, err := keyValue(pos[0])
	if err != nil {
		return fs.usageError("%s: %v", pos[0], err)
	}
	until, err := c.Throttle(ctx, k, v, *d)
	if err != nil {
		return explain(err, fs.url, "")
	}
	fmt.Fprintf(stdout, "%s = %s throttled until %s (opsq throttle --lift %s ends it sooner)\n", k, v, until.Local().Format(time.TimeOnly), pos[0])
	return nil
}

// keyValue reads KEY=VALUE: VALUE is an integer, a quoted JSON string, or else the string
// itself (as --meta reads it).
func keyValue(m string) (string, wire.MetadataValue, error) {
	k, v, ok := strings.Cut(m, "=")
	if !ok || k == "" || v == "" {
		return "", wire.MetadataValue{}, errors.New("want KEY=VALUE, such as company_id=42")
	}
	var value wire.MetadataValue
	if err := json.Unmarshal(metaValueJSON(v), &value); err != nil {
		return "", wire.MetadataValue{}, fmt.Errorf("VALUE: %v", err)
	}
	return k, value, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
