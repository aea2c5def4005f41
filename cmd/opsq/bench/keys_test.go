package bench

import (
	"testing"

	"opsq/api"
	"opsq/api/apikeys"
)

// TestKeysForRoute: each request carries the key of the narrowest role its route allows,
// admin's for a cancel, none for an open route or an unknown one; nothing without keys.
func TestKeysForRoute(t *testing.T) {
	t.Parallel()
	keys := benchKeys{}
	for _, r := range apikeys.Roles {
		keys[r] = "key-of-" + string(r)
	}
	for _, tt := range []struct {
		method, path string
		want         apikeys.Role
	}{
		{"POST", "/v1/submissions", apikeys.Producer},
		{"GET", "/v1/submissions", apikeys.Producer},
		{"GET", "/v1/submissions/383213601105641472", apikeys.Producer},
		{"GET", "/v1/submissions/383213601105641472/results", apikeys.Producer},
		{"POST", "/v1/submissions/383213601105641472/cancel", apikeys.Admin},
		{"POST", "/v1/reserve", apikeys.Consumer},
		{"POST", "/v1/reserve/preview", apikeys.Consumer},
		{"POST", "/v1/complete", apikeys.Consumer},
		{"POST", "/v1/fail", apikeys.Consumer},
		{"POST", "/v1/extend", apikeys.Consumer},
		{"GET", "/v1/cluster", apikeys.Admin},
		{"GET", "/metrics", apikeys.Metrics},
		{"GET", "/healthz", ""},
		{"GET", "/readyz", ""},
		{"GET", "/v1/openapi.json", ""},
		{"GET", "/ui/static/app.js", ""},
		{"ABUSE00001", "/v1/submissions", ""},
		{"GET", "/v1/submissions/", ""},
		{"GET", "/v1/submissions/1/results/more", ""},
	} {
		if got := keys.forRoute(tt.method, tt.path); got != keys[tt.want] {
			t.Errorf("forRoute(%s %s) = %q; want %q", tt.method, tt.path, got, keys[tt.want])
		}
		if got := (benchKeys{}).forRoute(tt.method, tt.path); got != "" {
			t.Errorf("without keys, forRoute(%s %s) = %q; want none", tt.method, tt.path, got)
		}
	}
	// Every route that needs a key gets one.
	for _, r := range api.Routes {
		if !r.Open() && keys.forRoute(r.Method, r.Path) == "" {
			t.Errorf("%s %s needs a key; forRoute gives none", r.Method, r.Path)
		}
	}
}
