package api

import (
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
