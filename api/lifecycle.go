package api

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/queuer"
)

// The lifecycle fields of a submission (DESIGN.md §3): on_failure, retry_backoff and
// not_before, each checked on its own so that every error names its field.

// maxFailAfterChunks bounds on_failure's fail_after.chunks: chunk counts are int32. The
// other bounds are the engine's (queuer/internal/submissions/lifecycle.go) and the wire's
// (wire.MaxBackoff).
const maxFailAfterChunks = math.MaxInt32

// onFailureForms is what on_failure may be, for error messages.
const onFailureForms = `"fail_submission", "continue", {"fail_after": {"chunks": K}} with K ≥ 0, or {"fail_after": {"fraction": F}} with 0 < F ≤ 1`

// parseOnFailure reads on_failure into the policy it sets and the canonical JSON echoed in
// the status.
func parseOnFailure(raw json.RawMessage) (queuer.FailurePolicy, json.RawMessage, error) {
	bad := func() (queuer.FailurePolicy, json.RawMessage, error) {
		return queuer.FailurePolicy{}, nil, badRequest("on_failure: must be %s, not %s", onFailureForms, abbreviate(raw))
	}
	var word string
	if json.Unmarshal(raw, &word) == nil {
		switch word {
		case "fail_submission":
			return queuer.FailurePolicy{}, wire.OnFailureFailSubmission, nil
		case "continue":
			return queuer.FailurePolicy{Continue: true}, wire.OnFailureContinue, nil
		}
		return bad()
	}
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(raw, &outer); err != nil || len(outer) != 1 || outer["fail_after"] == nil {
		return bad()
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(outer["fail_after"], &inner); err != nil || len(inner) != 1 {
		return bad()
	}
	switch {
	case inner["chunks"] != nil:
		var k int64
		if err := json.Unmarshal(inner["chunks"], &k); err != nil || k < 0 || k > maxFailAfterChunks {
			return queuer.FailurePolicy{}, nil, badRequest("on_failure: fail_after.chunks must be an integer between 0 and %d, not %s", maxFailAfterChunks, abbreviate(inner["chunks"]))
		}
		return queuer.FailurePolicy{AfterChunks: &k}, wire.OnFailureAfterChunks(k), nil
	case inner["fraction"] != nil:
		var f float64
		if err := json.Unmarshal(inner["fraction"], &f); err != nil || !(f > 0 && f <= 1) {
			return queuer.FailurePolicy{}, nil, badRequest("on_failure: fail_after.fraction must be a number greater than 0 and at most 1, not %s", abbreviate(inner["fraction"]))
		}
		return queuer.FailurePolicy{AfterFraction: &f}, wire.OnFailureAfterFraction(f), nil
	}
	return bad()
}

// parseBackoff reads retry_backoff. The answer has every field set, the defaults applied
// here: "initial": "0s" (retry at once) is a value, not an absent field.
func parseBackoff(raw json.RawMessage) (queuer.Backoff, error) {
	b := queuer.Backoff{
		Initial: queuer.BackoffInitialDefault,
		Factor:  queuer.BackoffFactorDefault,
		Max:     queuer.BackoffMaxDefault,
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return b, badRequest(`retry_backoff: must be an object such as {"initial": "1s", "factor": 2, "max": "1m"}, not %s`, abbreviate(raw))
	}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		v := fields[name]
		if isNull(v) {
			continue
		}
		switch name {
		case "initial", "max":
			lo := time.Duration(0)
			if name == "max" {
				lo = time.Nanosecond
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return b, badRequest("retry_backoff.%s: must be a duration string such as \"30s\", not %s", name, abbreviate(v))
			}
			d, err := time.ParseDuration(s)
			if err != nil || d < lo || d > wire.MaxBackoff {
				what := "0s"
				if name == "max" {
					what = "more than 0s"
				}
				return b, badRequest("retry_backoff.%s: must be a duration from %s to %s, such as \"30s\", not %s", name, what, wire.MaxBackoff, abbreviate(v))
			}
			if name == "initial" {
				b.Initial = d
			} else {
				b.Max = d
			}
		case "factor":
			// JSON has no Inf nor NaN; a number past float64 fails to decode.
			if err := json.Unmarshal(v, &b.Factor); err != nil || !(b.Factor > 0) || math.IsInf(b.Factor, 0) {
				return b, badRequest("retry_backoff.factor: must be a number greater than 0, such as 2, not %s", abbreviate(v))
			}
		default:
			if plainName.MatchString(name) {
				return b, badRequest("retry_backoff.%s: unknown field; retry_backoff has initial, factor and max", name)
			}
			return b, badRequest("retry_backoff: %s; it has initial, factor and max", unknownField(name))
		}
	}
	if b.Max < b.Initial {
		return b, badRequest("retry_backoff.max: %s is less than initial (%s); the default max is %s", b.Max, b.Initial, queuer.BackoffMaxDefault)
	}
	return b, nil
}

// parseNotBefore reads not_before: an RFC 3339 time, or a Go duration from now; at most
// NotBeforeMax ahead of now. A time in the past is no wait at all.
func parseNotBefore(raw json.RawMessage, now time.Time) (time.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, badRequest("not_before: must be a string, an RFC 3339 time or a duration such as \"10m\", not %s", abbreviate(raw))
	}
	s = strings.TrimSpace(s)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil || d < 0 {
			return time.Time{}, badRequest("not_before: %q is neither an RFC 3339 time (such as \"2026-01-02T15:04:05Z\") nor a duration from now of 0s or more (such as \"10m\")", abbreviate([]byte(s)))
		}
		if d > queuer.NotBeforeMax {
			return time.Time{}, badRequest("not_before: %s is more than %s ahead", d, progressDays(queuer.NotBeforeMax))
		}
		return now.Add(d), nil
	}
	if t.Sub(now) > queuer.NotBeforeMax {
		return time.Time{}, badRequest("not_before: %s is more than %s ahead", t.UTC().Format(time.RFC3339), progressDays(queuer.NotBeforeMax))
	}
	return t, nil
}

// progressDays writes a whole number of days as "30 days".
func progressDays(d time.Duration) string {
	return strconv.Itoa(int(d/(24*time.Hour))) + " days"
}

// parseRetryAfter reads a fail's retry_after: a duration greater than 0 and at most
// wire.MaxBackoff.
func parseRetryAfter(field string, raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || isNull(raw) {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, badRequest("%s: must be a duration string such as \"30s\", not %s", field, abbreviate(raw))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > wire.MaxBackoff {
		return 0, badRequest("%s: must be a duration greater than 0s and at most %s, such as \"30s\", not %s", field, wire.MaxBackoff, abbreviate(raw))
	}
	return d, nil
}
