package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	resp, err := http.Post(e.URL+"/v1/submissions", "application/json", strings.NewReader(`{"chunks": ["a", "b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Post(e.URL+"/v1/reserve", "application/json", strings.NewReader(`{"max": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d; want 200", resp.StatusCode)
	}
	for _, want := range []string{
		"opsq_reservations 1",
		"opsq_chunks_ingested_total 2",
		"opsq_reserved_total 1",
		`opsq_http_request_duration_seconds_count{method="POST",route="/v1/submissions",status="201"} 1`,
		"opsq_shards_reservable 64",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestMetricsLabelsBounded: invented methods and paths add no series; they all count under
// method "other" and route "unmatched".
func TestMetricsLabelsBounded(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	for i := range 50 {
		req, err := http.NewRequest(fmt.Sprintf("INVENTED%d", i), e.URL+fmt.Sprintf("/v1/nowhere/%d", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// An invented method on a real route as well.
	req, _ := http.NewRequest("BREW", e.URL+"/v1/reserve", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(body), "INVENTED") || strings.Contains(string(body), "BREW") || strings.Contains(string(body), "nowhere") {
		t.Errorf("/metrics holds a client's invented method or path:\n%s", body)
	}
	for _, want := range []string{
		`opsq_http_request_duration_seconds_count{method="other",route="unmatched",status="404"} 50`,
		`method="other",route="/v1/reserve",status="405"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
