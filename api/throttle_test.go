package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/identity"
	"opsq/sql/pgtest"
)

// TestThrottleBadInput: each bad throttle is a 400 naming its field, and sets nothing.
func TestThrottleBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	for _, c := range []struct{ name, body, field string }{
		{"no key", `{"value": 1, "for": "1s"}`, "key"},
		{"empty key", `{"key": "", "value": 1, "for": "1s"}`, "key"},
		{"key not a string", `{"key": 3, "value": 1, "for": "1s"}`, "key"},
		{"no value", `{"key": "k", "for": "1s"}`, "value"},
		{"null value", `{"key": "k", "value": null, "for": "1s"}`, "value"},
		{"float value", `{"key": "k", "value": 1.5, "for": "1s"}`, "value"},
		{"object value", `{"key": "k", "value": {}, "for": "1s"}`, "value"},
		{"int64 overflow", `{"key": "k", "value": 9223372036854775808, "for": "1s"}`, "value"},
		{"NUL in value", `{"key": "k", "value": "a\u0000b", "for": "1s"}`, "value"},
		// What decoding would silently replace with U+FFFD is refused, as on every route
		// (issue 31, finding 14).
		{"lone high surrogate in value", `{"key": "k", "value": "\ud800", "for": "1s"}`, "value"},
		{"lone low surrogate in value", `{"key": "k", "value": "a\udc00b", "for": "1s"}`, "value"},
		{"lone surrogate in key", `{"key": "k\ud800", "value": 1, "for": "1s"}`, "key"},
		{"@tenant with an integer", `{"key": "@tenant", "value": 42, "for": "1s"}`, "value"},
		{"@tenant with no tenant's name", `{"key": "@tenant", "value": "Not A Tenant", "for": "1s"}`, "value"},
		{"no for", `{"key": "k", "value": 1}`, "for"},
		{"for over an hour", `{"key": "k", "value": 1, "for": "1h0m1s"}`, "for"},
		{"for zero", `{"key": "k", "value": 1, "for": "0s"}`, "for"},
		{"for negative", `{"key": "k", "value": 1, "for": "-5s"}`, "for"},
		{"for not a duration", `{"key": "k", "value": 1, "for": "soon"}`, "for"},
		{"unknown field", `{"key": "k", "value": 1, "for": "1s", "tenant": "x"}`, "tenant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectError(t, postJSON(t, e, "/v1/throttle", c.body), http.StatusBadRequest, "", c.field)
		})
	}
	var n int
	if err := e.Pool.QueryRow(t.Context(), `SELECT count(*) FROM opsq.throttles`).Scan(&n); err != nil || n != 0 {
		t.Errorf("throttles after bad requests: %d (%v); want 0", n, err)
	}
}

// TestThrottle: a throttled value is handed out by no reserve (and shown in no preview)
// until its end, and is served after it; the other values keep flowing meanwhile; a
// string "1" and an integer 1 are different values.
func TestThrottle(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	throttled := mustSubmit(t, e, `{"chunks": ["a", "b", "c"], "strategic_metadata": {"company_id": 1}}`, 3)
	mustSubmit(t, e, `{"chunks": ["d", "e"], "strategic_metadata": {"company_id": "1"}}`, 2)
	mustSubmit(t, e, `{"chunks": ["f"]}`, 1)

	r := postJSON(t, e, "/v1/throttle", `{"key": "company_id", "value": 1, "for": "2s"}`)
	var th wire.Throttled
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &th) != nil {
		t.Fatalf("throttle: %d %s; want 200 and until", r.Status, r.Body)
	}
	if d := time.Until(th.Until); d < time.Second || d > 2*time.Second+time.Second {
		t.Errorf("throttle for 2s ends at %s, %s from now; want about 2s", th.Until, d)
	}

	reserve := func(body string) []wire.ReservedChunk {
		t.Helper()
		r := postJSON(t, e, "/v1/reserve", body)
		var got wire.Reserved
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
			t.Fatalf("reserve: %d %s", r.Status, r.Body)
		}
		return got.Chunks
	}
	pv := postJSON(t, e, "/v1/reserve/preview", `{"max": 10}`)
	var preview wire.Preview
	if pv.Status != http.StatusOK || json.Unmarshal(pv.Body, &preview) != nil {
		t.Fatalf("preview: %d %s", pv.Status, pv.Body)
	}
	for _, ch := range preview.Chunks {
		if ch.SubmissionID == throttled && time.Now().Before(th.Until) {
			t.Errorf("preview shows chunk %d of the throttled submission", ch.ChunkIndex)
		}
	}
	got := reserve(`{"max": 10}`)
	before := time.Now()
	for _, ch := range got {
		if ch.SubmissionID == throttled {
			t.Errorf("reserve handed out chunk %d of the throttled value %s before the throttle's end", ch.ChunkIndex, th.Until)
		}
	}
	if len(got) != 3 && before.Before(th.Until) {
		t.Errorf("reserve while throttled: %d chunks; want the 3 of the other values", len(got))
	}

	// A reserve that waits is answered at the end (the instance looks again then), not at
	// the end of its wait.
	served := reserve(`{"max": 10, "wait": "20s"}`)
	if now := time.Now(); len(served) == 0 || now.Before(th.Until.Add(-50*time.Millisecond)) || now.After(th.Until.Add(5*time.Second)) {
		t.Errorf("a reserve waiting from before the throttle's end %s: %d chunks at %s; want the throttled ones soon after the end", th.Until, len(served), now)
	}
	// The rest after the end: the throttled chunks, and never before it.
	pgtest.Eventually(t, 10*time.Second, "the throttled chunks served after the throttle's end", func() bool {
		got := reserve(`{"max": 10}`)
		if len(got) > 0 && time.Now().Before(th.Until.Add(-50*time.Millisecond)) {
			t.Fatalf("reserve handed out %d chunks (submission %s) before the throttle's end %s", len(got), got[0].SubmissionID, th.Until)
		}
		served = append(served, got...)
		return len(served) == 3
	})
	for _, ch := range served {
		if ch.SubmissionID != throttled {
			t.Errorf("after the throttle: chunk of %s; want those of %s", ch.SubmissionID, throttled)
		}
	}
}

// TestThrottleConfined: a consumer limited to tenants throttles within them only — the
// same value of another tenant keeps flowing — and may not throttle another tenant by
// "@tenant".
func TestThrottleConfined(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	submit := func(key string) string {
		t.Helper()
		r := a.call(t, key, http.MethodPost, "/v1/submissions", `{"chunks": ["a"], "strategic_metadata": {"company_id": 7}}`)
		var c struct{ ID string }
		if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &c) != nil {
			t.Fatalf("submit: %d %s", r.Status, r.Body)
		}
		return c.ID
	}
	beta := submit(a.key["producer2"])
	other := submit(a.key["producer"])
	expectError(t, a.call(t, a.key["consumer2"], http.MethodPost, "/v1/throttle", `{"key": "@tenant", "value": "default", "for": "1m"}`),
		http.StatusBadRequest, "", "value", "beta")
	if r := a.call(t, a.key["consumer2"], http.MethodPost, "/v1/throttle", `{"key": "company_id", "value": 7, "for": "1m"}`); r.Status != http.StatusOK {
		t.Fatalf("throttle by a consumer of beta: %d %s", r.Status, r.Body)
	}
	r := a.call(t, a.key["consumer"], http.MethodPost, "/v1/reserve", `{"max": 10}`)
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("reserve: %d %s", r.Status, r.Body)
	}
	if len(got.Chunks) != 1 || got.Chunks[0].SubmissionID != other {
		t.Errorf("reserve by an unlimited consumer: %s; want only the chunk of %s (tenant default), not of %s (beta, throttled)", r.Body, other, beta)
	}
}

// TestDashboardLimitsInForce: the overview lists the throttles in force and the values a
// rate_limit holds back (its bucket not full), and nothing when none is.
func TestDashboardLimitsInForce(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	limits := func() string {
		t.Helper()
		r := getPath(t, e, "/ui/overview.json")
		var v struct {
			Limits []struct{ Kind, Key, Value, Tenant, Detail string }
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &v) != nil {
			t.Fatalf("overview.json: %d %s", r.Status, r.Body)
		}
		b, _ := json.Marshal(v.Limits)
		return string(b)
	}
	if got := limits(); got != "[]" {
		t.Fatalf("limits with nothing in force: %s; want []", got)
	}
	mustSubmit(t, e, `{"chunks": ["a", "b", "c"], "strategic_metadata": {"company_id": 7}}`, 3)
	if r := postJSON(t, e, "/v1/throttle", `{"key": "mode", "value": "preview", "for": "1m"}`); r.Status != http.StatusOK {
		t.Fatalf("throttle: %d %s", r.Status, r.Body)
	}
	if r := postJSON(t, e, "/v1/reserve", `{"max": 3, "strategy": {"rate_limit": {"key": "company_id", "per_second": 0.001, "burst": 2}}}`); r.Status != http.StatusOK {
		t.Fatalf("reserve: %d %s", r.Status, r.Body)
	}
	got := limits()
	for _, want := range []string{`"Kind":"throttle","Key":"mode","Value":"\"preview\"","Tenant":""`, `"Kind":"rate_limit","Key":"company_id","Value":"7"`, "0.001/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("limits in force: %s; want %s", got, want)
		}
	}
	r := getPath(t, e, "/ui/")
	if !strings.Contains(string(r.Body), `<td data-l="key">company_id</td>`) || !strings.Contains(string(r.Body), `<td data-l="kind">throttle</td>`) {
		t.Errorf("the overview page lists no limit in force:\n%s", r.Body)
	}
}

// deleteThrottle sends DELETE /v1/throttle with a JSON body (none when "") and a query.
func deleteThrottle(t *testing.T, e *env, query, body string) reply {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	return httpCall(t, http.MethodDelete, e.URL+"/v1/throttle"+query, "application/json", r)
}

// TestLiftThrottle (issue 33): DELETE /v1/throttle ends a throttle at once — the value's
// chunks are handed out right after the answer — by a JSON body or by the query; a lift of
// a throttle not in force is 404.
func TestLiftThrottle(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	throttled := mustSubmit(t, e, `{"chunks": ["a", "b"], "strategic_metadata": {"company_id": 7, "mode": "preview"}}`, 2)
	reserve := func() []wire.ReservedChunk {
		t.Helper()
		r := postJSON(t, e, "/v1/reserve", `{"max": 1}`)
		var got wire.Reserved
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
			t.Fatalf("reserve: %d %s", r.Status, r.Body)
		}
		return got.Chunks
	}
	for _, c := range []struct{ name, set, query, body string }{
		{"body", `{"key": "company_id", "value": 7, "for": "1h"}`, "", `{"key": "company_id", "value": 7}`},
		{"query", `{"key": "mode", "value": "preview", "for": "1h"}`, "?key=mode&value=preview", ""},
	} {
		if r := postJSON(t, e, "/v1/throttle", c.set); r.Status != http.StatusOK {
			t.Fatalf("%s: throttle: %d %s", c.name, r.Status, r.Body)
		}
		if got := reserve(); len(got) != 0 {
			t.Fatalf("%s: reserve while throttled: %d chunks; want none", c.name, len(got))
		}
		r := deleteThrottle(t, e, c.query, c.body)
		var lifted wire.ThrottleLifted
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &lifted) != nil || lifted.Lifted != 1 {
			t.Fatalf("%s: lift: %d %s; want 200 {\"lifted\": 1}", c.name, r.Status, r.Body)
		}
		if got := reserve(); len(got) != 1 || got[0].SubmissionID != throttled {
			t.Errorf("%s: reserve right after the lift: %v; want a chunk of %s", c.name, got, throttled)
		}
		expectError(t, deleteThrottle(t, e, c.query, c.body), http.StatusNotFound, "not_found", "no throttle of")
	}
}

// TestLiftThrottleBadInput: each bad lift is a 400 naming its field, and lifts nothing.
func TestLiftThrottleBadInput(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	if r := postJSON(t, e, "/v1/throttle", `{"key": "k", "value": 1, "for": "1h"}`); r.Status != http.StatusOK {
		t.Fatalf("throttle: %d %s", r.Status, r.Body)
	}
	for _, c := range []struct{ name, query, body, field string }{
		{"nothing", "", "", "key"},
		{"no key", "", `{"value": 1}`, "key"},
		{"no value", "", `{"key": "k"}`, "value"},
		{"float value", "", `{"key": "k", "value": 1.5}`, "value"},
		{"for", "", `{"key": "k", "value": 1, "for": "1s"}`, "for"},
		{"@tenant with an integer", "", `{"key": "@tenant", "value": 1}`, "value"},
		{"query without value", "?key=k", "", "value"},
		{"query without key", "?value=1", "", "key"},
		{"query and body", "?key=k&value=1", `{"key": "k", "value": 1}`, "key"},
		{"NUL in query value", "?key=k&value=a%00b", "", "value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectError(t, deleteThrottle(t, e, c.query, c.body), http.StatusBadRequest, "", c.field)
		})
	}
	if got := e.Q.ThrottlesInForce(); len(got) != 1 {
		t.Errorf("throttles in force after bad lifts: %d; want the 1 set", len(got))
	}
}

// TestLiftThrottleConfined: a consumer limited to tenants lifts its tenants' throttles
// only (another's, or one of every tenant, is 404 to it); an unconfined consumer and an
// admin lift any; a producer may not lift.
func TestLiftThrottleConfined(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	set := func(key string) {
		t.Helper()
		if r := a.call(t, a.key[key], http.MethodPost, "/v1/throttle", `{"key": "company_id", "value": 7, "for": "1h"}`); r.Status != http.StatusOK {
			t.Fatalf("throttle by %s: %d %s", key, r.Status, r.Body)
		}
	}
	lift := func(key string) reply {
		t.Helper()
		return a.call(t, a.key[key], http.MethodDelete, "/v1/throttle", `{"key": "company_id", "value": 7}`)
	}
	set("consumer") // every tenant
	expectError(t, lift("consumer2"), http.StatusNotFound, "not_found", "beta")
	expectError(t, lift("producer"), http.StatusForbidden, "forbidden")
	if r := lift("admin"); r.Status != http.StatusOK {
		t.Errorf("lift by admin: %d %s; want 200", r.Status, r.Body)
	}
	set("consumer2") // beta's
	if r := lift("consumer2"); r.Status != http.StatusOK {
		t.Errorf("lift of its own by consumer2: %d %s; want 200", r.Status, r.Body)
	}
	set("consumer2")
	if r := lift("consumer"); r.Status != http.StatusOK {
		t.Errorf("lift of beta's by an unconfined consumer: %d %s; want 200", r.Status, r.Body)
	}
	expectError(t, a.call(t, a.key["consumer2"], http.MethodDelete, "/v1/throttle", `{"key": "@tenant", "value": "default"}`),
		http.StatusBadRequest, "", "value", "beta")
}

// TestThrottleTooMany (issue 31, finding 5): a key past its bound of throttles in force is
// refused with 429 too_many_throttles naming the key and the bound, and a Retry-After; its
// existing throttles may still be set again.
func TestThrottleTooMany(t *testing.T) {
	t.Parallel()
	a := setupAuth(t)
	throttle := func(value int) reply {
		return a.call(t, a.key["consumer2"], http.MethodPost, "/v1/throttle", fmt.Sprintf(`{"key": "company_id", "value": %d, "for": "1h"}`, value))
	}
	for i := range queuer.MaxThrottlesPerKey {
		if r := throttle(i); r.Status != http.StatusOK {
			t.Fatalf("throttle %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	r := throttle(-1)
	expectError(t, r, http.StatusTooManyRequests, "too_many_throttles", `"consumer2"`, fmt.Sprint(queuer.MaxThrottlesPerKey))
	if ra := r.Header.Get("Retry-After"); ra == "" {
		t.Error("429 too_many_throttles without Retry-After")
	}
	if r := throttle(0); r.Status != http.StatusOK {
		t.Errorf("setting an existing throttle again at the bound: %d %s; want 200", r.Status, r.Body)
	}
}

// TestDashboardLiftsThrottle (issue 33): the overview lists who set each throttle and when,
// and its Lift button leads to a confirmation page whose form lifts that row only (the
// throttle of one tenant), refused from another origin; a row no longer in force is 404.
func TestDashboardLiftsThrottle(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	ctx := t.Context()
	// As the API sets them for a consumer of beta, and for one of every tenant.
	if _, err := e.Q.Throttle(identity.With(ctx, identity.Caller{Name: "consumer2"}), "company_id", "7", []string{"beta"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Q.Throttle(identity.With(ctx, identity.Caller{Name: "consumer"}), "company_id", "7", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	post := func(path string, form url.Values, origin string) reply {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	overview := string(getPath(t, e, "/ui/").Body)
	beta := "/ui/throttles/confirm?key=company_id&amp;tenant=beta&amp;value=7"
	for _, want := range []string{"set by consumer2 at ", "set by consumer at ", beta, ">Lift…</a>"} {
		if !strings.Contains(overview, want) {
			t.Errorf("the overview does not show %q:\n%s", want, overview)
		}
	}
	confirm := getPath(t, e, strings.ReplaceAll(beta, "&amp;", "&"))
	if confirm.Status != http.StatusOK || !strings.Contains(string(confirm.Body), "Lift the throttle of company_id = 7 in tenant beta (set by consumer2 at ") ||
		!strings.Contains(string(confirm.Body), `action="/ui/throttles/lift"`) {
		t.Fatalf("the confirmation page: %d\n%s", confirm.Status, confirm.Body)
	}
	form := url.Values{"key": {"company_id"}, "value": {"7"}, "tenant": {"beta"}}
	if r := post("/ui/throttles/lift", form, "http://evil.example"); r.Status != http.StatusForbidden {
		t.Errorf("a lift from another origin: %d; want 403", r.Status)
	}
	if r := post("/ui/throttles/lift", form, e.URL); r.Status != http.StatusSeeOther {
		t.Fatalf("the lift: %d %s; want 303 to the overview", r.Status, r.Body)
	}
	var tenants []string
	for _, th := range e.Q.ThrottlesInForce() {
		tenants = append(tenants, th.Tenant)
	}
	if len(tenants) != 1 || tenants[0] != "" {
		t.Errorf("throttles in force after lifting beta's: tenants %q; want only every tenant's", tenants)
	}
	if r := post("/ui/throttles/lift", form, e.URL); r.Status != http.StatusNotFound {
		t.Errorf("lifting it again: %d; want 404", r.Status)
	}
	if r := getPath(t, e, "/ui/throttles/confirm?key=company_id&value=7&tenant=beta"); r.Status != http.StatusNotFound {
		t.Errorf("the confirmation page of a lifted throttle: %d; want 404", r.Status)
	}
	if r := getPath(t, e, "/ui/throttles/confirm?key=company_id&value=7.5"); r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), "value") {
		t.Errorf("the confirmation page of a bad value: %d %s; want 400 naming value", r.Status, r.Body)
	}
}
