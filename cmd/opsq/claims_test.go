package main

import (
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
)

func TestCompactRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []int
		want string
	}{
		{nil, "-"},
		{[]int{3}, "3"},
		{[]int{0, 1, 2, 3, 4, 5, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20}, "0-5,9,12-20"},
		{[]int{9, 1, 0, 2, 2}, "0-2,9"},
		{[]int{1, 3, 5}, "1,3,5"},
		{[]int{7, 8}, "7-8"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := compactRanges(tt.in); got != tt.want {
				t.Errorf("compactRanges(%v) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatClaims(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	shards := func(state wire.ClaimState, inflight int, ns ...int) []wire.ClusterShard {
		var out []wire.ClusterShard
		for _, n := range ns {
			out = append(out, wire.ClusterShard{Shard: n, State: state, Inflight: inflight})
		}
		return out
	}
	cl := wire.Cluster{
		ShardCount: 16,
		Instances: []wire.ClusterInstance{
			{ID: "a", AdvertiseURL: "http://a:3999", HeartbeatAt: ptr(now.Add(-1500 * time.Millisecond)), Shards: shards("active", 2, 0, 1, 2, 3, 9)},
			{ID: "b", AdvertiseURL: "http://b:3999", HeartbeatAt: ptr(now.Add(-3 * time.Second)), Draining: true, Shards: shards("draining", 0, 10, 11)},
			{ID: "gone", AdvertiseURL: "http://c:3999", Shards: append(shards("active", 1, 4), shards("draining", 0, 5)...)},
		},
		Unclaimed: []int{6, 7, 8, 12, 13, 14, 15},
	}
	var b strings.Builder
	if err := formatClaims(&b, cl, now); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"16 shards: 9 claimed by 3 instances, 7 unclaimed\n" +
		"\n" +
		"INSTANCE  URL            HEARTBEAT  DRAINING       SHARDS  INFLIGHT  SHARD LIST\n" +
		"a         http://a:3999  1.5s ago   no             5       10        0-3,9\n" +
		"b         http://b:3999  3s ago     yes            2       0         10-11\n" +
		"gone      http://c:3999  -          1 of 2 shards  2       1         4-5\n" +
		"\n" +
		"unclaimed: 6-8,12-15\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func ptr[T any](v T) *T { return &v }
