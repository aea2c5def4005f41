package api

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"opsq/queuer"
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

// scrape returns the body of GET /metrics.
func scrape(t *testing.T, e *env) string {
	t.Helper()
	r := getPath(t, e, "/metrics")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d; want 200", r.Status)
	}
	return string(r.Body)
}

// TestMetricsForOperators: counters are typed counters, and the claims loop, the waiters,
// the forwarded requests and the cluster's figures are there; the cluster's figures are
// cached, so a scrape storm reads the database once per queuer.ClusterStatsTTL.
func TestMetricsForOperators(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	postSubmission(t, e, "application/json", `{"chunks": ["a", "b"]}`)
	body := scrape(t, e)
	for _, want := range []string{
		"# TYPE opsq_completed_total counter",
		"# TYPE opsq_reserved_total counter",
		"# TYPE opsq_failed_attempts_total counter",
		"# TYPE opsq_chunks_ingested_total counter",
		"# TYPE opsq_reservations gauge",
		"# TYPE opsq_claims_renew_duration_seconds histogram",
		"# TYPE opsq_cluster_owner_switches_total counter",
		"opsq_claims_acquired_total 64",
		"opsq_claims_lost_total 0",
		"opsq_shards_owned 64",
		"opsq_waiters 0",
		"opsq_children_waiting 0",
		"opsq_reserves_parked 0",
		`opsq_forwarded_requests_total{outcome="served",request="reserve"} 0`,
		"opsq_cluster_submissions_in_progress 1",
		"opsq_cluster_chunks_pending 2",
		"opsq_cluster_shards_unserved 0",
		"opsq_cluster_instances_live 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(body, "opsq_claims_renew_duration_seconds_count ") || strings.Contains(body, "opsq_claims_renew_duration_seconds_count 0\n") {
		t.Errorf("/metrics has no renewal in opsq_claims_renew_duration_seconds")
	}
	since := metricValue(t, body, "opsq_claims_seconds_since_renewal")
	if since <= 0 || since > 10 {
		t.Errorf("opsq_claims_seconds_since_renewal %g; want between 0 and 10", since)
	}
	// Within the TTL, the cluster's figures come from the cache: a new submission does not
	// show yet.
	postSubmission(t, e, "application/json", `{"chunks": ["c"]}`)
	if body := scrape(t, e); !strings.Contains(body, "opsq_cluster_chunks_pending 2\n") {
		t.Errorf("a second scrape within %s read the database again: chunks pending %g; want the cached 2",
			queuer.ClusterStatsTTL, metricValue(t, body, "opsq_cluster_chunks_pending"))
	}
}

// metricValue is the value of the unlabelled sample name in a scrape.
func metricValue(t *testing.T, body, name string) float64 {
	t.Helper()
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return v
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
