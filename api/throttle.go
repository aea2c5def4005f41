package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/strategy"
)

// throttle is POST /v1/throttle (DESIGN.md §3): a consumer's back-pressure. No chunk of a
// submission whose strategic metadata has key = value (or, with the key "@tenant", of the
// tenant value) is handed out by any instance until the answer's until; a consumer
// confined to tenants throttles within them only.
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
	var key string
	if raw := bytes.TrimSpace(body.Key); len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &key) != nil ||
		key == "" || len(key) > MaxStrategicKeyBytes || strings.ContainsRune(key, 0) {
		return badRequest("key: must be a strategic metadata key (1 to %d bytes without NUL characters) or %s", MaxStrategicKeyBytes, queuer.TenantKey)
	}
	if err := checkText("key", body.Key, key, MaxStrategicKeyBytes); err != nil {
		return err
	}
	value, err := throttleValue(body.Value)
	if err != nil {
		return err
	}
	if key == queuer.TenantKey {
		// The tenant key's values are tenant names: any other value would throttle nothing.
		if !value.IsString() {
			return badRequest("value: the key %s takes a tenant's name (a string), not %s", queuer.TenantKey, abbreviate(body.Value))
		}
		if err := queuer.CheckTenant(value.Str()); err != nil {
			return badRequest("value: %v", err)
		}
	}
	if body.For == nil {
		return badRequest("for: required, a duration between %s and %s, such as \"30s\"", wire.MinThrottle, wire.MaxThrottle)
	}
	d, err := parseDuration(*body.For, "for", wire.MinThrottle, wire.MaxThrottle)
	if err != nil {
		return err
	}
	tenants, ok := confined(c)
	if !ok {
		tenants = nil // every tenant
	} else if key == queuer.TenantKey && !slices.Contains(tenants, value.Str()) {
		return badRequest("value: a consumer limited to tenants may throttle only its own tenants (%s)", strings.Join(tenants, ", "))
	}
	until, err := s.q.Throttle(c.Request().Context(), key, value.String(), tenants, d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wire.Throttled{Until: until.UTC()})
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
