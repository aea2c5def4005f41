package reserver

import (
	"fmt"
	"testing"
)

// TestSharedPairs: reservations that share one Pairs, prepared outside the lock, count
// as if each brought its Values.
func TestSharedPairs(t *testing.T) {
	t.Parallel()
	values := map[string]string{"company_id": "42", "mode": `"preview"`}
	pairs := NewPairs(values)
	if pairs.Len() != 2 {
		t.Fatalf("NewPairs of 2 values: Len() = %d; want 2", pairs.Len())
	}
	r := New(Config{})
	for i := range 100 {
		res := mk(fmt.Sprint("tok-", i), 1, int32(i), i%4, i)
		res.Values, res.Pairs = values, pairs
		if !r.Reserve(res) {
			t.Fatalf("Reserve(%d) = false; want true", i)
		}
	}
	if got := r.InflightValue("company_id", "42"); got != 100 {
		t.Fatalf("InflightValue(company_id, 42) = %d; want 100", got)
	}
	r.DropShard(0)
	expire(r, at(49))
	checkInvariants(t, r)
	if got := r.InflightValue("mode", `"preview"`); got != r.Len() {
		t.Fatalf("InflightValue(mode, preview) = %d; want Len() = %d", got, r.Len())
	}
	expire(r, at(1_000))
	r.mu.Lock()
	left := len(r.mu.byValue)
	r.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d value counts left after every reservation ended; want 0", left)
	}
}
