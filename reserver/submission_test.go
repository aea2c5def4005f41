package reserver

import (
	"testing"
	"time"
)

func TestDropSubmission(t *testing.T) {
	t.Parallel()
	r := New(Config{})
	exp := time.Now().Add(time.Minute)
	values := map[string]string{"company_id": "42"}
	for i := range int32(10) {
		sid := int64(1 + i%2) // submissions 1 and 2
		if !r.Reserve(Reservation{Token: string(rune('a' + i)), Key: Key{SubmissionID: sid, ChunkIndex: i}, Shard: int(i % 3), ExpiresAt: exp, Values: values}) {
			t.Fatalf("reserve %d failed", i)
		}
	}
	dropped := r.DropSubmission(1)
	if len(dropped) != 5 {
		t.Fatalf("DropSubmission(1) returned %d reservations; want 5", len(dropped))
	}
	for _, d := range dropped {
		if d.Key.SubmissionID != 1 || r.IsReserved(d.Key) {
			t.Fatalf("dropped %+v: want a reservation of submission 1, no longer reserved", d)
		}
	}
	if r.Len() != 5 || r.InflightValue("company_id", "42") != 5 {
		t.Fatalf("after the drop: %d live, %d in flight for company 42; want 5 and 5", r.Len(), r.InflightValue("company_id", "42"))
	}
	total := 0
	for _, n := range inflightShards(r) {
		total += n
	}
	if total != 5 {
		t.Fatalf("per-shard counts add up to %d; want 5", total)
	}
	if len(r.DropSubmission(1)) != 0 {
		t.Fatal("a second DropSubmission(1) returned reservations")
	}
}

func TestTakeExpiredHoldsUntilRelease(t *testing.T) {
	t.Parallel()
	r := New(Config{})
	now := time.Now()
	k := Key{SubmissionID: 1, ChunkIndex: 0}
	if !r.Reserve(Reservation{Token: "a", Key: k, Shard: 3, ExpiresAt: now.Add(-time.Millisecond)}) {
		t.Fatal("reserve failed")
	}
	got := r.TakeExpired(now, now.Add(time.Minute))
	if len(got) != 1 || got[0].Token != "a" || !got[0].ExpiresAt.Before(now) {
		t.Fatalf("TakeExpired = %+v; want reservation a with its expired lease", got)
	}
	if !r.IsReserved(k) || r.InflightShard(3) != 1 {
		t.Fatal("the chunk of an expired reservation must stay held until Release")
	}
	if _, ok := r.Extend("a", now.Add(time.Hour)); ok {
		t.Fatal("Extend of a reservation whose lease ran out succeeded; want refused")
	}
	if again := r.TakeExpired(now.Add(time.Second), now.Add(time.Minute)); len(again) != 0 {
		t.Fatalf("a second TakeExpired before retryAt returned %d; want 0", len(again))
	}
	if again := r.TakeExpired(now.Add(2*time.Minute), now.Add(3*time.Minute)); len(again) != 1 {
		t.Fatalf("TakeExpired after retryAt returned %d; want it again", len(again))
	}
	r.Release("a")
	if r.IsReserved(k) || r.Len() != 0 {
		t.Fatal("Release after TakeExpired must free the chunk")
	}
}
