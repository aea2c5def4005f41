package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/queuer"
)

// Lifting a throttle before its end (issue 33): the Lift button of a throttle in the
// overview's "Throttles and rate limits in force" leads to a confirmation page whose form
// POSTs (sameOrigin checks it), as every action of the dashboard does; the dashboard calls
// the engine directly, which ends it on every instance before the answer. A button lifts
// its row only: the throttle of one tenant, or the one of every tenant.

// throttleRow is what names a throttle's row: its key, its value's JSON text and its
// tenant ("" for every tenant).
type throttleRow struct {
	Key, Value, Tenant string
}

// liftURL is the confirmation page of lifting r.
func (r throttleRow) liftURL() string {
	return "/ui/throttles/confirm?" + url.Values{"key": {r.Key}, "value": {r.Value}, "tenant": {r.Tenant}}.Encode()
}

// describe says r in words: "company_id = 7 in tenant acme".
func (r throttleRow) describe() string {
	where := "in every tenant"
	if r.Tenant != "" {
		where = "in tenant " + r.Tenant
	}
	return fmt.Sprintf("%s = %s %s", r.Key, r.Value, where)
}

// readThrottleRow reads and checks a row's names from a query or a form.
func readThrottleRow(get func(string) string) (throttleRow, error) {
	r := throttleRow{Key: get("key"), Value: get("value"), Tenant: get("tenant")}
	if r.Key == "" || len(r.Key) > 256 || strings.ContainsRune(r.Key, 0) {
		return r, errors.New("key: a throttle's key is required")
	}
	var s string
	if _, err := strconv.ParseInt(r.Value, 10, 64); err != nil && (json.Unmarshal([]byte(r.Value), &s) != nil || !strings.HasPrefix(r.Value, `"`)) {
		return r, fmt.Errorf("value: %q is not a throttle's value (an integer, or a string in JSON)", cut(r.Value, 40))
	}
	if r.Tenant != "" {
		if err := queuer.CheckTenant(r.Tenant); err != nil {
			return r, fmt.Errorf("tenant: %v", err)
		}
	}
	return r, nil
}

// inForce returns the throttle of r in force on this instance (the same on every instance).
func (d *dashboard) inForce(r throttleRow) (queuer.Throttle, bool) {
	for _, th := range d.q.ThrottlesInForce() {
		if th.Key == r.Key && th.Value == r.Value && th.Tenant == r.Tenant {
			return th, true
		}
	}
	return queuer.Throttle{}, false
}

func (d *dashboard) confirmLift(c echo.Context) error {
	r, err := readThrottleRow(c.QueryParam)
	if err != nil {
		return d.fail(c, http.StatusBadRequest, "%s", err)
	}
	th, ok := d.inForce(r)
	if !ok {
		return d.fail(c, http.StatusNotFound, "no throttle of %s in force: it may have ended or been lifted", r.describe())
	}
	return d.render(c, http.StatusOK, "confirm", page{Title: "Lift a throttle", Data: confirmView{
		Question: fmt.Sprintf("Lift the throttle of %s (%s, until %s UTC)? Its chunks are handed out again at once, by every instance.",
			r.describe(), setByText(th), th.Until.UTC().Format(time.TimeOnly)),
		Action: "/ui/throttles/lift", Fields: map[string]string{"key": r.Key, "value": r.Value, "tenant": r.Tenant}, Back: "/ui/",
	}})
}

func (d *dashboard) lift(c echo.Context) error {
	r, err := readThrottleRow(c.FormValue)
	if err != nil {
		return d.fail(c, http.StatusBadRequest, "%s", err)
	}
	ctx := c.Request().Context()
	switch _, err := d.q.LiftThrottle(ctx, r.Key, r.Value, []string{r.Tenant}); {
	case errors.Is(err, queuer.ErrNoThrottle):
		return d.fail(c, http.StatusNotFound, "no throttle of %s in force: it may have ended or been lifted", r.describe())
	case err != nil:
		return err
	}
	d.log.InfoContext(ctx, "dashboard action", "action", "lift_throttle", "key", r.Key, "value", r.Value, "tenant", r.Tenant)
	return c.Redirect(http.StatusSeeOther, "/ui/")
}

// setByText says who set a throttle and when: "set by c1 at 10:31:02 UTC".
func setByText(th queuer.Throttle) string {
	who := th.SetBy
	if who == "" {
		who = "no key" // OPSQ_AUTH=off, or set before opsq recorded it
	}
	return fmt.Sprintf("set by %s at %s UTC", who, th.SetAt.UTC().Format(time.TimeOnly))
}
