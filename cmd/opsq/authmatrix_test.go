package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"opsq/api"
	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// matrixCaller is who sends a request of the matrix: a key (or none) and what it is.
type matrixCaller struct {
	name string
	key  string       // "" for none
	role apikeys.Role // for a valid key; "" for the others, which every instance refuses
	says string       // what the 401 of a refused one mentions
}

// matrixReply is an answer, read whole.
type matrixReply struct {
	status int
	header http.Header
	body   []byte
}

// code is the error code of an error answer, or "".
func (r matrixReply) code() string {
	var e wire.ErrorBody
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (r matrixReply) String() string {
	return http.StatusText(r.status) + " " + strings.TrimSpace(string(r.body[:min(len(r.body), 300)]))
}

// TestAuthMatrix runs the role table (api.Routes) against two real instances with
// OPSQ_AUTH=required: every route they serve, with no key, an unknown, a revoked and an
// expired key, and a key of each role, gets what the table gives it: 401 with
// WWW-Authenticate: Bearer for the refused keys, 403 for a role the route does not allow,
// and anything but 401 or 403 for one it allows (a dummy body or id may be a 400 or 404:
// what is checked is the auth decision). The routes of the REST API come from the
// instances' own /v1/openapi.json, so that a route without a line in api.Routes fails
// here (api's TestAuthMatrix checks the same of echo's routes, the dashboard's included).
// Also: a request marked forwarded without a valid signature is refused; and with two
// tenants, route by route, nothing of tenant acme's is visible or actionable with tenant
// globex's keys (404 as for an unknown id, or "unknown" for a token), while an admin key
// acts on both.
func TestAuthMatrix(t *testing.T) {
	dbURL := pgtest.NewDB(t)
	c := clustertest.New(t, opsqBinary, dbURL)
	ctx := t.Context()
	key := map[string]string{}
	for _, name := range []string{"producer", "producer2", "consumer", "consumer-acme", "consumer-globex", "metrics", "admin", "revoked", "expired"} {
		spec := apikeys.Spec{Name: "matrix-" + name, Role: apikeys.Role(strings.TrimSuffix(name, "2"))}
		switch name {
		case "producer":
			spec.Tenant = "acme"
		case "producer2":
			spec.Tenant = "globex"
		case "consumer-acme", "consumer-globex":
			spec.Role, spec.Tenants = apikeys.Consumer, []string{strings.TrimPrefix(name, "consumer-")}
		case "revoked":
			spec.Role = apikeys.Admin
		case "expired":
			spec.Role, spec.Expires = apikeys.Admin, time.Millisecond
		}
		_, k, err := apikeys.CreateSpec(ctx, c.Pool, spec)
		if err != nil {
			t.Fatal(err)
		}
		key[name] = k
	}
	if _, err := apikeys.Revoke(ctx, c.Pool, "matrix-revoked"); err != nil {
		t.Fatal(err)
	}
	// The matrix sends hundreds of refused requests in a few seconds from one address:
	// more than the throttle of failed authentications allows (api's
	// TestAuthFailuresThrottled).
	c.Env = append(c.Env, "OPSQ_AUTH=required", "OPSQ_AUTH_FAILURES_PER_SECOND=1000000")
	c.Key = key["admin"]
	insts := c.StartN(2)

	callers := []matrixCaller{
		{name: "no key", says: "Authorization: Bearer"},
		{name: "unknown key", key: apikeys.Generate(), says: "unknown"},
		{name: "revoked key", key: key["revoked"], says: "revoked"},
		{name: "expired key", key: key["expired"], says: "expired"},
	}
	for _, role := range apikeys.Roles {
		callers = append(callers, matrixCaller{name: string(role) + " key", key: key[string(role)], role: role})
	}
	hc := *c.HTTP
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	send := func(method, u string, hdr http.Header, body string) matrixReply {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = hdr
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return matrixReply{resp.StatusCode, resp.Header, b}
	}

	// The REST API's routes, as the instances document them, are the table's.
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	r := send(http.MethodGet, insts[0].URL+"/v1/openapi.json", http.Header{}, "")
	if err := json.Unmarshal(r.body, &doc); r.status != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/openapi.json: %s, %v", r, err)
	}
	var served, listed []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if m := strings.ToUpper(method); slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}, m) {
				if m == "HEAD" {
					m = "GET" // a HEAD is routed as the GET, with its roles (api/head.go)
				}
				served = append(served, m+" "+openAPIToEcho(path))
			}
		}
	}
	for _, rt := range api.Routes {
		if !rt.Dashboard && !rt.Instances {
			listed = append(listed, rt.Method+" "+rt.Path)
		}
	}
	for _, s := range served {
		if !slices.Contains(listed, s) {
			t.Errorf("the instances serve %s (their /v1/openapi.json); api.Routes does not give its roles", s)
		}
	}
	for _, l := range listed {
		if !slices.Contains(served, l) {
			t.Errorf("api.Routes lists %s; the instances' /v1/openapi.json does not", l)
		}
	}
	if len(served) < 10 {
		t.Fatalf("found %d routes in /v1/openapi.json: %v", len(served), served)
	}

	// The dashboard takes a session its login page starts for an admin key. The admin's
	// dashboard requests each carry a session of their own (the matrix logs out too); every
	// other key of the matrix goes in the cookie as it is, and must not open anything.
	session := func() *http.Cookie {
		t.Helper()
		login := send(http.MethodPost, insts[0].URL+"/ui/login",
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {insts[0].URL}}, url.Values{"key": {key["admin"]}}.Encode())
		cookies := (&http.Response{Header: login.header}).Cookies()
		if login.status != http.StatusSeeOther || len(cookies) != 1 || cookies[0].Value == "" || cookies[0].Value == key["admin"] {
			t.Fatalf("dashboard login with an admin key: %s, cookies %v; want a redirect setting a session's cookie", login, cookies)
		}
		return cookies[0]
	}
	cookieName := session().Name

	requests := 0
	for _, inst := range insts {
		for _, rt := range api.Routes {
			path := strings.ReplaceAll(strings.ReplaceAll(rt.Path, ":id", "999"), "*", "app.js")
			route := inst.ID + ": " + rt.Method + " " + rt.Path
			for _, who := range callers {
				hdr, body := http.Header{}, ""
				switch {
				case rt.Dashboard && who.role == "admin":
					hdr.Set("Cookie", session().String())
				case rt.Dashboard && who.key != "":
					hdr.Set("Cookie", (&http.Cookie{Name: cookieName, Value: who.key}).String())
				case who.key != "":
					hdr.Set("Authorization", "Bearer "+who.key)
				}
				if rt.Method == http.MethodPost && rt.Dashboard {
					hdr.Set("Content-Type", "application/x-www-form-urlencoded")
					hdr.Set("Origin", inst.URL)
				} else if rt.Method == http.MethodPost {
					hdr.Set("Content-Type", "application/json")
					body = "{}"
				}
				got := send(rt.Method, inst.URL+path, hdr, body)
				requests++
				switch {
				case rt.Open():
					if got.status >= 400 {
						t.Errorf("%s with %s: %s; want it served to anyone", route, who.name, got)
					}
				case who.role != "" && rt.Allows(who.role):
					if got.status == http.StatusUnauthorized || got.status == http.StatusForbidden || got.status >= 500 ||
						(got.status == http.StatusSeeOther && strings.HasPrefix(got.header.Get("Location"), "/ui/login")) {
						t.Errorf("%s with %s: %s; want it let through", route, who.name, got)
					}
				case rt.Dashboard:
					// Whoever is not admin is sent to the login page, or refused.
					page := got.status == http.StatusSeeOther && strings.HasPrefix(got.header.Get("Location"), "/ui/login")
					refused := got.status == http.StatusUnauthorized && strings.HasPrefix(got.header.Get("WWW-Authenticate"), "Bearer")
					if !page && !refused {
						t.Errorf("%s with %s: %s (Location %q); want the login page (303) or 401 with WWW-Authenticate: Bearer",
							route, who.name, got, got.header.Get("Location"))
					}
				case who.role != "":
					if got.status != http.StatusForbidden || got.code() != "forbidden" || !strings.Contains(got.header.Get("WWW-Authenticate"), "insufficient_scope") {
						t.Errorf("%s with %s: %s (WWW-Authenticate %q); want 403 forbidden, insufficient_scope", route, who.name, got, got.header.Get("WWW-Authenticate"))
					}
				default:
					if got.status != http.StatusUnauthorized || got.code() != "unauthorized" || !strings.HasPrefix(got.header.Get("WWW-Authenticate"), "Bearer") ||
						!strings.Contains(string(got.body), who.says) {
						t.Errorf("%s with %s: %s (WWW-Authenticate %q); want 401 unauthorized with WWW-Authenticate: Bearer, saying %q",
							route, who.name, got, got.header.Get("WWW-Authenticate"), who.says)
					}
				}
			}
			// The dashboard's key is the cookie, never the Authorization header.
			if rt.Dashboard && !rt.Open() {
				got := send(rt.Method, inst.URL+path, http.Header{"Authorization": {"Bearer " + key["admin"]}}, "")
				requests++
				// (A POST without the dashboard's Origin is refused before its key is read: 403.)
				if got.status != http.StatusUnauthorized && got.status != http.StatusSeeOther &&
					(got.status != http.StatusForbidden || rt.Method != http.MethodPost) {
					t.Errorf("%s with an admin key in Authorization, no cookie: %s; want refused", route, got)
				}
			}
		}
	}
	t.Logf("%d requests, %d routes × %d callers on %d instances", requests, len(api.Routes), len(callers), len(insts))

	// A reserve or extend marked forwarded by another instance, with a valid consumer key
	// but no valid signature, is refused and never acted on.
	for path, body := range map[string]string{"/v1/reserve": `{"max": 1}`, "/v1/extend": `{"tokens": [], "lease": "1m"}`} {
		for _, sig := range []string{"", "1700000000000.AAAA"} {
			hdr := http.Header{"Authorization": {"Bearer " + key["consumer"]}, "Content-Type": {"application/json"}}
			hdr.Set(wire.ForwardedHeader, insts[1].ID)
			if sig != "" {
				hdr.Set(wire.ForwardedSignatureHeader, sig)
			}
			got := send(http.MethodPost, insts[0].URL+path, hdr, body)
			if got.status != http.StatusUnauthorized || got.code() != "forwarded_signature" {
				t.Errorf("POST %s marked forwarded, signature %q: %s; want 401 forwarded_signature", path, sig, got)
			}
		}
	}

	// Two tenants. acme's submission, through one instance; globex's keys, through the
	// other, route by route: each answers for acme's id exactly what it answers for an id
	// nobody has.
	as := func(inst *clustertest.Instance, name string) *client.Client {
		return client.New(inst.URL, client.WithHTTPClient(c.HTTP), client.WithKey(key[name]))
	}
	a, b := insts[0], insts[1]
	const chunks = 40 // spread over both instances' shards
	in := make([]string, chunks)
	for i := range in {
		in[i] = "x"
	}
	acme, err := as(a, "producer").Submit(ctx, wire.Submission{Chunks: in})
	if err != nil {
		t.Fatal(err)
	}
	globex, err := as(a, "producer2").Submit(ctx, wire.Submission{Chunks: in})
	if err != nil {
		t.Fatal(err)
	}
	tenantRoutes := 0
	for _, rt := range api.Routes {
		if rt.Dashboard || !strings.Contains(rt.Path, ":id") {
			continue
		}
		for _, who := range []string{"producer2", "consumer-globex"} {
			if !rt.Allows(apikeys.Role(strings.TrimSuffix(strings.TrimSuffix(who, "-globex"), "2"))) {
				continue
			}
			hdr := http.Header{"Authorization": {"Bearer " + key[who]}}
			body := ""
			if rt.Method == http.MethodPost {
				hdr.Set("Content-Type", "application/json")
				body = "{}"
			}
			for _, inst := range insts {
				got := send(rt.Method, inst.URL+strings.ReplaceAll(rt.Path, ":id", acme.ID), hdr, body)
				unknown := send(rt.Method, inst.URL+strings.ReplaceAll(rt.Path, ":id", "999"), hdr, body)
				tenantRoutes++
				if got.status != http.StatusNotFound || got.code() != "not_found" || string(got.body) != string(unknown.body) {
					t.Errorf("%s: %s %s of tenant acme with %s: %s; want what an unknown id gets, %s", inst.ID, rt.Method, rt.Path, who, got, unknown)
				}
			}
		}
	}
	if tenantRoutes < 16 {
		t.Errorf("checked %d tenant routes; want every route on an id", tenantRoutes)
	}
	// Untouched by globex's cancel, retry, pause: in progress, not paused, acme's.
	if st, err := as(b, "producer").Status(ctx, acme.ID, 0); err != nil || st.State != wire.StateInProgress || st.Paused || st.Tenant != "acme" {
		t.Errorf("acme's submission after globex's attempts: %+v, %v; want in progress, acme's", st, err)
	}
	if page, err := as(b, "producer2").List(ctx, client.ListOptions{}); err != nil || len(page.Submissions) != 1 || page.Submissions[0].ID != globex.ID {
		t.Errorf("globex's list: %+v, %v; want its own submission only", page, err)
	}
	if _, err := as(b, "producer2").List(ctx, client.ListOptions{Tenant: "acme"}); !isStatus(err, http.StatusForbidden) {
		t.Errorf("globex listing acme's: %v; want 403", err)
	}
	if page, err := as(b, "admin").List(ctx, client.ListOptions{State: wire.StateInProgress}); err != nil || len(page.Submissions) != 2 {
		t.Errorf("admin's list: %+v, %v; want both tenants'", page, err)
	}

	// Consumers: globex's sees and reserves globex's chunks only, on either instance
	// (forwarded or not); acme's tokens are unknown to it and stay acme's consumer's.
	for _, inst := range insts {
		pv, err := as(inst, "consumer-globex").Preview(ctx, wire.ReserveRequest{Max: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range pv {
			if ch.SubmissionID != globex.ID {
				t.Errorf("%s: globex's consumer previews a chunk of %s", inst.ID, ch.SubmissionID)
			}
		}
	}
	var globexTokens []string
	for i := 0; len(globexTokens) < chunks; i++ {
		inst := insts[i%2]
		got, err := as(inst, "consumer-globex").Reserve(ctx, wire.ReserveRequest{Max: chunks / 4, Wait: "5s"})
		if err != nil || len(got) == 0 {
			t.Fatalf("%s: globex's consumer: %d chunks, %v; want globex's", inst.ID, len(got), err)
		}
		for _, ch := range got {
			if ch.SubmissionID != globex.ID {
				t.Fatalf("%s: globex's consumer reserved a chunk of %s", inst.ID, ch.SubmissionID)
			}
			globexTokens = append(globexTokens, ch.Token)
		}
	}
	if got, err := as(b, "consumer-globex").Reserve(ctx, wire.ReserveRequest{Max: 10}); err != nil || len(got) != 0 {
		t.Errorf("globex's consumer with globex's all taken: %d chunks, %v; want none (acme's are not its)", len(got), err)
	}
	var acmeTokens []string
	for len(acmeTokens) < chunks {
		got, err := as(a, "consumer-acme").Reserve(ctx, wire.ReserveRequest{Max: chunks, Wait: "5s"})
		if err != nil || len(got) == 0 {
			t.Fatalf("acme's consumer: %d chunks, %v; want acme's", len(got), err)
		}
		for _, ch := range got {
			acmeTokens = append(acmeTokens, ch.Token)
		}
	}
	for _, inst := range insts {
		res, err := as(inst, "consumer-globex").Complete(ctx, wire.Completion{Token: acmeTokens[0], Output: "stolen"}, wire.Completion{Token: globexTokens[0], Output: "ok"})
		if err != nil || len(res) != 2 || res[0].Status != wire.StatusUnknown || res[1].Status == wire.StatusUnknown {
			t.Errorf("%s: globex's consumer completing acme's token and its own: %+v, %v; want unknown, then not", inst.ID, res, err)
		}
		if res, err := as(inst, "consumer-globex").Fail(ctx, wire.ChunkFailure{Token: acmeTokens[1], Error: "x"}); err != nil || res[0].Status != wire.StatusUnknown {
			t.Errorf("%s: globex's consumer failing acme's token: %+v, %v; want unknown", inst.ID, res, err)
		}
		if res, err := as(inst, "consumer-globex").Extend(ctx, "1m", acmeTokens[2]); err != nil || res[0].Status != wire.StatusUnknown {
			t.Errorf("%s: globex's consumer extending acme's token: %+v, %v; want unknown", inst.ID, res, err)
		}
	}
	completions := make([]wire.Completion, len(acmeTokens))
	for i, tok := range acmeTokens {
		completions[i] = wire.Completion{Token: tok, Output: "done"}
	}
	if res, err := as(b, "consumer-acme").Complete(ctx, completions...); err != nil || slices.ContainsFunc(res, func(r wire.TokenResult) bool { return r.Status != wire.StatusCompleted }) {
		t.Errorf("acme's consumer completing its chunks after globex's tried: %+v, %v; want every one completed", res, err)
	}
	if st, err := as(a, "admin").Status(ctx, acme.ID, 10*time.Second); err != nil || st.State != wire.StateCompleted || st.Tenant != "acme" {
		t.Errorf("acme's submission: %+v, %v; want completed", st, err)
	}
	if _, err := as(b, "admin").Cancel(ctx, globex.ID); err != nil {
		t.Errorf("admin cancelling globex's submission: %v; want it cancelled", err)
	}
}

// openAPIToEcho writes a path of the OpenAPI document as echo routes it: {id} is :id.
func openAPIToEcho(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			parts[i] = ":" + p[1:len(p)-1]
		}
	}
	return strings.Join(parts, "/")
}
