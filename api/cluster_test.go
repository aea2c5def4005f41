package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"opsq/claims"
)

// TestClusterAnswerJSON pins the JSON of GET /v1/cluster (DESIGN.md §3): the field names,
// the claim states and [] for empty lists, as they were when claims.Cluster carried the
// JSON tags itself.
func TestClusterAnswerJSON(t *testing.T) {
	t.Parallel()
	at := func(sec int) time.Time { return time.Date(2026, 11, 23, 17, 0, sec, 0, time.UTC) }
	started, beat := at(1), at(2)
	cl := claims.Cluster{
		ShardCount: 4,
		Instances: []claims.ClusterInstance{
			{ID: "a", AdvertiseURL: "http://a:3999", StartedAt: &started, HeartbeatAt: &beat, Live: true, Shards: []claims.Claim{
				{Shard: 0, Generation: 3, Inflight: 2, Available: true, SoftExpiresAt: at(10), HardExpiresAt: at(20)},
				{Shard: 1, Generation: 4, Draining: true, SoftExpiresAt: at(11), HardExpiresAt: at(21)},
			}},
			{ID: "b", AdvertiseURL: "", Draining: true, Shards: []claims.Claim{}},
		},
		Unclaimed: []int{2},
		Disabled:  []int{},
	}
	got, err := json.Marshal(clusterAnswer(cl))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"shard_count":4,"instances":[` +
		`{"id":"a","advertise_url":"http://a:3999","started_at":"2026-11-23T17:00:01Z","heartbeat_at":"2026-11-23T17:00:02Z","live":true,"draining":false,"shards":[` +
		`{"shard":0,"generation":3,"state":"active","inflight":2,"available":true,"soft_expires_at":"2026-11-23T17:00:10Z","hard_expires_at":"2026-11-23T17:00:20Z"},` +
		`{"shard":1,"generation":4,"state":"draining","inflight":0,"available":false,"soft_expires_at":"2026-11-23T17:00:11Z","hard_expires_at":"2026-11-23T17:00:21Z"}]},` +
		`{"id":"b","advertise_url":"","started_at":null,"heartbeat_at":null,"live":false,"draining":true,"shards":[]}],` +
		`"unclaimed":[2],"disabled":[]}`
	if string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}

	empty, err := json.Marshal(clusterAnswer(claims.Cluster{}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"shard_count":0,"instances":[],"unclaimed":[],"disabled":[]}`; string(empty) != want {
		t.Fatalf("empty cluster: got %s; want %s", empty, want)
	}
}

// TestClusterEndpoint reads GET /v1/cluster from a running instance: the keys of every
// level of the answer are there (moved here from claims' TestLoadCluster, which encoded
// claims.Cluster when it carried the JSON tags).
func TestClusterEndpoint(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	r := getPath(t, e, "/v1/cluster")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /v1/cluster: %d %s; want 200", r.Status, r.Body)
	}
	expectJSONType(t, r)
	for _, key := range []string{`"shard_count":64`, `"instances":[{`, `"unclaimed":[`, `"disabled":[]`, `"id":"test-`,
		`"advertise_url":"http://127.0.0.1:1"`, `"live":true`, `"draining":false`, `"shards":[{`, `"state":"active"`, `"inflight":0`,
		`"available":`, `"generation":`, `"soft_expires_at":"`, `"hard_expires_at":"`, `"heartbeat_at":"`, `"started_at":"`} {
		if !strings.Contains(string(r.Body), key) {
			t.Errorf("GET /v1/cluster body %s has no %s", r.Body, key)
		}
	}
}
