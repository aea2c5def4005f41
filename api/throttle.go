package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/strategy"
)

// throttle is POST /v1/throttle (DESIGN.md §3): a consumer's back-pressure. No chunk of a
// submission whose strategic metadata has key = value (or, with the key "@tenant", of the
// tenant value) is handed out by any instance until the answer's until; a consumer
// confined to tenants throttles within them only. Past a tenant's or the key's bound of
// throttles in force it is 429 too_many_throttles (docs/rates.md).
func (s *server) throttle(c echo.Context) error {
	var body struct {
		// Key as its JSON text: checked for what decoding it would hide (a lone surrogate
		// escape becomes U+FFFD), as every route's text is.
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
		For   *string         `json:"for"`
	}
	if err := s.decodeBody(c, &body); err != nil {
		return err
	}
	key, value, err := throttleTarget(body.Key, body.Value)
	if err != nil {
		return err
	}
	if body.For == nil {
		return badRequest("for: required, a duration between %s and %s, such as \"30s\"", wire.MinThrottle, wire.MaxThrottle)
	}
	d, err := parseDuration(*body.For, "for", wire.MinThrottle, wire.MaxThrottle)
	if err != nil {
		return err
	}
	tenants, err := throttleTenants(c, key, value, "throttle")
	if err != nil {
		return err
	}
	until, err := s.q.Throttle(c.Request().Context(), key, value.String(), tenants, d)
	var limit *queuer.ThrottleLimitError
	switch {
	case errors.As(err, &limit):
		return &Error{Status: http.StatusTooManyRequests, Code: "too_many_throttles", RetryAfter: max(limit.FirstEnd, time.Second), Message: limit.Error()}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, wire.Throttled{Until: until.UTC()})
}

// liftThrottle is DELETE /v1/throttle (issue 33): the throttles of key = value end at once,
// on every instance before the answer, in the tenants the caller may throttle in (those of
// a consumer confined to tenants; all of them for any other consumer and for admin). The
// key and value are a JSON body as POST's (without for), or the query's key and value
// (value=42: the integer; value="42" quoted, or any text that is no integer: a string).
// 404 not_found when none of them is in force.
func (s *server) liftThrottle(c echo.Context) error {
	raw, err := s.readBody(c)
	if err != nil {
		return err
	}
	var body struct {
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	q := c.QueryParams()
	switch inQuery := q.Has("key") || q.Has("value"); {
	case inQuery && len(bytes.TrimSpace(raw)) > 0:
		return badRequest("key: give key and value in the JSON body or in the query, not both")
	case inQuery:
		if !q.Has("key") {
			return badRequest("key: required with value")
		}
		if !q.Has("value") {
			return badRequest("value: required with key")
		}
		if !utf8.ValidString(q.Get("key")) {
			return badRequest("key: must be UTF-8 text without NUL characters")
		}
		body.Key, _ = json.Marshal(q.Get("key"))
		if body.Value, err = metadataValue(q.Get("value")); err != nil {
			return err
		}
	default:
		if err := decodeJSON(raw, &body); err != nil {
			return err
		}
	}
	key, value, err := throttleTarget(body.Key, body.Value)
	if err != nil {
		return err
	}
	tenants, err := throttleTenants(c, key, value, "lift")
	if err != nil {
		return err
	}
	n, err := s.q.LiftThrottle(c.Request().Context(), key, value.String(), tenants)
	switch {
	case errors.Is(err, queuer.ErrNoThrottle):
		where := "in force"
		if tenants != nil {
			where = "in force in the tenants of this key (" + strings.Join(tenants, ", ") + ")"
		}
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no throttle of %s = %s %s", key, value.String(), where)}
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, wire.ThrottleLifted{Lifted: n})
}

// throttleTarget reads and checks a throttle's key and value, as their JSON texts.
func throttleTarget(rawKey, rawValue json.RawMessage) (string, strategy.Value, error) {
	var key string
	if raw := bytes.TrimSpace(rawKey); len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &key) != nil ||
		key == "" || len(key) > MaxStrategicKeyBytes || strings.ContainsRune(key, 0) {
		return "", strategy.Value{}, badRequest("key: must be a strategic metadata key (1 to %d bytes without NUL characters) or %s", MaxStrategicKeyBytes, queuer.TenantKey)
	}
	if err := checkText("key", rawKey, key, MaxStrategicKeyBytes); err != nil {
		return "", strategy.Value{}, err
	}
	value, err := throttleValue(rawValue)
	if err != nil {
		return "", strategy.Value{}, err
	}
	if key == queuer.TenantKey {
		// The tenant key's values are tenant names: any other value would throttle nothing.
		if !value.IsString() {
			return "", strategy.Value{}, badRequest("value: the key %s takes a tenant's name (a string), not %s", queuer.TenantKey, abbreviate(rawValue))
		}
		if err := queuer.CheckTenant(value.Str()); err != nil {
			return "", strategy.Value{}, badRequest("value: %v", err)
		}
	}
	return key, value, nil
}

// throttleTenants are the tenants the caller throttles in, or lifts throttles in: those of
// a consumer confined to tenants, nil (every tenant) for any other caller. Under "@tenant"
// a confined consumer may name only its own tenants.
func throttleTenants(c echo.Context, key string, value strategy.Value, verb string) ([]string, error) {
	tenants, ok := confined(c)
	if !ok {
		return nil, nil
	}
	if key == queuer.TenantKey && !slices.Contains(tenants, value.Str()) {
		return nil, badRequest("value: a consumer limited to tenants may %s only its own tenants (%s)", verb, strings.Join(tenants, ", "))
	}
	return tenants, nil
}

// throttleValue reads a throttle's value: a JSON integer (int64) or string, as a strategic
// metadata value is.
func throttleValue(raw json.RawMessage) (strategy.Value, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return strategy.Value{}, badRequest("value: required, an integer (int64) or a string")
	}
	if raw[0] == '"' {
		var str string
		if err := json.Unmarshal(raw, &str); err != nil {
			return strategy.Value{}, badRequest("value: must be an integer (int64) or a string")
		}
		if err := checkText("value", raw, str, MaxStrategicValueBytes); err != nil {
			return strategy.Value{}, err
		}
		return strategy.StringValue(str), nil
	}
	i, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return strategy.Value{}, badRequest("value: must be an integer (int64) or a string, not %s", abbreviate(raw))
	}
	return strategy.IntValue(i), nil
}
