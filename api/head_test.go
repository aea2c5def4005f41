package api

import (
	"net/http"
	"testing"
)

// TestHead: every GET route answers HEAD with the GET's status and no body; a route with
// no GET answers 405.
func TestHead(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	id := expectCreated(t, postJSON(t, e, "/v1/submissions", `{"chunks": ["a"]}`), http.StatusCreated, 1)
	for _, c := range []struct {
		path string
		want int
	}{
		{"/healthz", 200}, {"/readyz", 200}, {"/metrics", 200}, {"/v1/openapi.json", 200},
		{"/v1/cluster", 200}, {"/v1/submissions", 200}, {"/v1/submissions/" + id, 200},
		{"/v1/submissions/" + id + "/results", 200}, {"/v1/submissions/" + id + "/failures", 200},
		{"/v1/submissions/12345", 404}, {"/v1/nope", 404}, {"/v1/reserve", 405},
	} {
		r := httpCall(t, http.MethodHead, e.URL+c.path, "", nil)
		if r.Status != c.want || len(r.Body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes of body; want %d with none", c.path, r.Status, len(r.Body), c.want)
		}
		if c.want == 200 {
			if g := getPath(t, e, c.path); g.Header.Get("Content-Type") != r.Header.Get("Content-Type") {
				t.Errorf("HEAD %s: Content-Type %q; GET answers %q", c.path, r.Header.Get("Content-Type"), g.Header.Get("Content-Type"))
			}
		}
	}
}
