package pgtest

import (
	"sync"
	"testing"

	"opsq/reserver"
)

// HandOutEachOnce runs workers consumers side by side until each has nothing left, and
// fails the test unless each of total chunks was handed out exactly once. consume(g)
// reserves as consumer g does, completes what it got, and returns the keys of the chunks
// it got; none means nothing is left for g, which stops.
func HandOutEachOnce(t testing.TB, workers, total int, consume func(g int) ([]reserver.Key, error)) {
	t.Helper()
	var mu sync.Mutex
	delivered := map[reserver.Key]int{}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for {
				keys, err := consume(g)
				if err != nil {
					t.Error(err)
					return
				}
				if len(keys) == 0 {
					return
				}
				mu.Lock()
				for _, k := range keys {
					delivered[k]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	dups := 0
	for _, n := range delivered {
		dups += n - 1
	}
	if len(delivered) != total || dups != 0 {
		t.Fatalf("%d chunks delivered, %d duplicates; want %d and 0", len(delivered), dups, total)
	}
}
