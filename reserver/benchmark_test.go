package reserver

import (
	"fmt"
	"testing"
)

// fill reserves n reservations that expire far in the future, on 64 shards,
// as the background of a benchmark.
func fill(r *Reserver, n int) {
	values := map[string]string{"company_id": "42", "mode": `"preview"`}
	for i := range n {
		r.Reserve(Reservation{
			Token:     fmt.Sprintf("bg-%047d", i),
			Key:       Key{SubmissionID: -1 - int64(i/1000), ChunkIndex: int32(i % 1000)},
			Shard:     i % 64,
			ExpiresAt: at(1 << 30),
			Values:    values,
		})
	}
}

// BenchmarkReserveRelease measures one Reserve and one Release of the same
// reservation, beside 0 or 100 000 other live reservations.
func BenchmarkReserveRelease(b *testing.B) {
	for _, live := range []int{0, 100_000} {
		b.Run(fmt.Sprint("live=", live), func(b *testing.B) {
			r := New(Config{})
			fill(r, live)
			toks := make([]string, 1024)
			for i := range toks {
				toks[i] = token50(i)
			}
			values := map[string]string{"company_id": "7", "mode": `"preview"`}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				res := Reservation{
					Token:     toks[i%len(toks)],
					Key:       Key{SubmissionID: int64(i / 1000), ChunkIndex: int32(i % 1000)},
					Shard:     i % 64,
					ExpiresAt: at(i % 3600),
					Values:    values,
				}
				if !r.Reserve(res) {
					b.Fatalf("Reserve(%d) = false", i)
				}
				if _, ok := r.Release(res.Token); !ok {
					b.Fatalf("Release(%d) = false", i)
				}
			}
		})
	}
}

// BenchmarkExpire measures the expiry loop's work per expired reservation
// (TakeExpired, then Release): batches of 1 000 due reservations are made
// (untimed) and expired (timed) beside 100 000 live ones that are not due.
func BenchmarkExpire(b *testing.B) {
	const batch = 1000
	r := New(Config{})
	fill(r, 100_000)
	values := map[string]string{"company_id": "7", "mode": `"preview"`}
	toks := make([]string, batch)
	for i := range toks {
		toks[i] = token50(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		b.StopTimer()
		for i := range batch {
			r.Reserve(Reservation{
				Token:     toks[i],
				Key:       Key{SubmissionID: int64(done + i), ChunkIndex: 0},
				Shard:     i % 64,
				ExpiresAt: at(done + i),
				Values:    values,
			})
		}
		b.StartTimer()
		if got := len(expire(r, at(done+batch-1))); got != batch {
			b.Fatalf("expired %d; want %d", got, batch)
		}
	}
}
