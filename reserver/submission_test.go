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
	for _, n := range r.InflightShards() {
		total += n
	}
	if total != 5 {
		t.Fatalf("per-shard counts add up to %d; want 5", total)
	}
	if len(r.DropSubmission(1)) != 0 {
		t.Fatal("a second DropSubmission(1) returned reservations")
	}
}
