package reserver

import (
	"fmt"
	"runtime"
	"testing"
)

// token50 returns a 50-byte token, unique for i.
func token50(i int) string { return fmt.Sprintf("%050d", i) }

// TestMemory100000 checks that 100 000 live reservations stay small (DESIGN
// §6: an instance with 100 000 live reservations stays under 300 MB RSS).
// It does not call t.Parallel: it measures the heap, so it must run alone.
func TestMemory100000(t *testing.T) {
	const (
		n     = 100_000
		limit = 100 << 20
	)
	tests := []struct {
		name   string
		values func(i int) map[string]string
	}{
		// The worst case: every reservation brings its own Values map.
		{name: "map per reservation", values: func(i int) map[string]string {
			return map[string]string{"company_id": fmt.Sprint(i % 5000), "mode": `"preview"`}
		}},
		// What the queuer does: the reservations of a submission share
		// its map (here 1 000 chunks per submission).
		{name: "map per submission", values: func() func(int) map[string]string {
			var m map[string]string
			return func(i int) map[string]string {
				if i%1000 == 0 {
					m = map[string]string{"company_id": fmt.Sprint(i / 1000), "mode": `"preview"`}
				}
				return m
			}
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := heapAlloc()
			r := New(Config{})
			for i := range n {
				res := Reservation{
					Token:      token50(i),
					Key:        Key{SubmissionID: int64(i / 1000), ChunkIndex: int32(i % 1000)},
					Shard:      i % 64,
					Generation: 3,
					Consumer:   "host-3/pid-77", // one string shared, as consumers are
					ExpiresAt:  at(i),
					Values:     tt.values(i),
				}
				if !r.Reserve(res) {
					t.Fatalf("Reserve(%d) = false; want true", i)
				}
			}
			grew := heapAlloc() - before
			t.Logf("%d reservations: heap grew %.1f MiB (%d bytes per reservation, tokens and Values included)",
				n, float64(grew)/(1<<20), grew/n)
			if grew > limit {
				t.Fatalf("heap grew %d MiB for %d reservations; want under %d MiB", grew>>20, n, limit>>20)
			}
			if got := r.Len(); got != n {
				t.Fatalf("Len() = %d; want %d", got, n)
			}
			runtime.KeepAlive(r)
		})
	}
}

// heapAlloc returns the bytes of live heap objects after a full collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
