package api

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"opsq/queuer"
	"opsq/sql/pgtest"
)

// TestMetricsClusterFiguresNotStale: when the cluster's figures cannot be read, a scrape
// leaves them out rather than showing the last ones as now (a stale 0 unserved shards
// during an outage), and opsq_cluster_stats_age_seconds grows past the cache's TTL; once
// they can be read again they are back, fresh.
func TestMetricsClusterFiguresNotStale(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	body := scrape(t, e)
	if !strings.Contains(body, "\nopsq_cluster_shards_unserved 0\n") {
		t.Fatalf("/metrics lacks opsq_cluster_shards_unserved 0 with the database up")
	}
	if age := metricValue(t, body, "opsq_cluster_stats_age_seconds"); age < 0 || age > 5 {
		t.Errorf("opsq_cluster_stats_age_seconds %g right after a read; want between 0 and 5", age)
	}

	// The figures' query reads opsq.submissions: without it, every read fails.
	exec := func(sql string) {
		t.Helper()
		if _, err := e.Pool.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE opsq.submissions RENAME TO submissions_hidden`)
	hidden := true
	t.Cleanup(func() {
		if hidden {
			_, _ = e.Pool.Exec(t.Context(), `ALTER TABLE opsq.submissions_hidden RENAME TO submissions`)
		}
	})
	pgtest.WaitFor(t, 30*time.Second, "the cluster's figures left out of /metrics", func() string {
		body = scrape(t, e)
		if strings.Contains(body, "\nopsq_cluster_shards_unserved ") || strings.Contains(body, "\nopsq_cluster_chunks_pending ") {
			return "the figures are still there"
		}
		return ""
	})
	// The figures go once the cache's TTL has passed since the last good read began; the
	// age counts from its end, so it may be short of the TTL by that read's time (on a busy
	// machine, 4.999 s was seen): half the TTL tells a stale age from a fresh one all the same.
	if age := metricValue(t, body, "opsq_cluster_stats_age_seconds"); age < queuer.ClusterStatsTTL.Seconds()/2 {
		t.Errorf("opsq_cluster_stats_age_seconds %g with the figures left out; want at least half the cache's TTL %s", age, queuer.ClusterStatsTTL)
	}
	for _, name := range []string{"opsq_claims_seconds_since_renewal", "opsq_shards_owned"} {
		metricValue(t, body, name) // the instance's own figures are still there (or it fails)
	}

	exec(`ALTER TABLE opsq.submissions_hidden RENAME TO submissions`)
	hidden = false
	pgtest.WaitFor(t, 30*time.Second, "the cluster's figures back in /metrics", func() string {
		body = scrape(t, e)
		if !strings.Contains(body, "\nopsq_cluster_shards_unserved 0\n") {
			return "no opsq_cluster_shards_unserved 0"
		}
		if age := metricValue(t, body, "opsq_cluster_stats_age_seconds"); age > 5 {
			return fmt.Sprintf("opsq_cluster_stats_age_seconds %g", age)
		}
		return ""
	})
}
