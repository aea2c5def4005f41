package valuerates

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// clock is a time the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) move(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func setup(t *testing.T) (*Counter, *clock) {
	t.Helper()
	clk := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	return New(clk.now), clk
}

func find(rates []Rate, key, value string) (Rate, bool) {
	for _, r := range rates {
		if r.Key == key && r.Value == value {
			return r, true
		}
	}
	return Rate{}, false
}

// TestTopCountsPerValue: counts per key and value, the most first, with the rate over the
// time the counter has counted (at least a second).
func TestTopCountsPerValue(t *testing.T) {
	t.Parallel()
	c, clk := setup(t)
	for range 30 {
		c.Add("company_id", "1")
	}
	for range 10 {
		c.Add("company_id", "2")
	}
	c.Add("@tenant", `"acme"`)
	clk.move(5 * time.Second)
	got := c.Top(Shown)
	want := []Rate{{"company_id", "1", 30, 6}, {"company_id", "2", 10, 2}, {"@tenant", `"acme"`, 1, 0.2}}
	if len(got) != len(want) {
		t.Fatalf("Top = %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Value != want[i].Value || got[i].Count != want[i].Count || math.Abs(got[i].PerS-want[i].PerS) > 1e-9 {
			t.Errorf("Top[%d] = %+v; want %+v", i, got[i], want[i])
		}
	}
	if got := c.Top(1); len(got) != 1 || got[0].Value != "1" {
		t.Errorf("Top(1) = %+v; want company_id 1 alone", got)
	}
}

// TestTopWindow: the window is the slot in progress and the Slots−1 before it; older
// hand-outs drop out, and the rate is over the window's length.
func TestTopWindow(t *testing.T) {
	t.Parallel()
	c, clk := setup(t)
	// 10 hand-outs of "old" in the first slot, then 6 of "new" in each of the next 6.
	for range 10 {
		c.Add("k", "old")
	}
	for range Slots {
		clk.move(SlotTime)
		for range 6 {
			c.Add("k", "new")
		}
	}
	// Now at the start of slot 6: the window is slots 1 to 6, 50 s long.
	got := c.Top(Shown)
	if _, ok := find(got, "k", "old"); ok {
		t.Errorf("Top = %+v; want old gone, counted 60 s ago", got)
	}
	r, ok := find(got, "k", "new")
	if !ok || r.Count != 6*Slots || math.Abs(r.PerS-float64(6*Slots)/50) > 1e-9 {
		t.Errorf("new: %+v; want %d chunks over 50 s", r, 6*Slots)
	}
	// A slot not written since it came round again counts nothing.
	clk.move(3 * SlotTime)
	r, _ = find(c.Top(Shown), "k", "new")
	if r.Count != 3*6 {
		t.Errorf("new after 3 idle slots: %d chunks; want %d", r.Count, 3*6)
	}
	clk.move(time.Hour)
	if got := c.Top(Shown); len(got) != 0 {
		t.Errorf("Top after an idle hour = %+v; want nothing", got)
	}
}

// TestTopBounded: past Capacity values in a slot, memory stays bounded, the heavy values
// are still found with their counts to within the slot's hand-outs ÷ Capacity, never
// overstated, and the many light ones are not inflated.
func TestTopBounded(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	const light = 10_000
	// Interleaved: 3 heavy values 100 times each, among 10 000 light values once each.
	for i := range light {
		c.Add("company_id", fmt.Sprint(1_000_000+i))
		if i%100 == 0 {
			for _, v := range []string{"1", "2", "3"} {
				c.Add("company_id", v)
			}
		}
	}
	total := int64(light + 3*100)
	c.mu.Lock()
	held := len(c.mu.slots[0].heap)
	indexed := len(c.mu.slots[0].index)
	c.mu.Unlock()
	if held != Capacity || indexed != Capacity {
		t.Errorf("the slot holds %d values (index %d); want at most %d", held, indexed, Capacity)
	}
	got := c.Top(Shown)
	if len(got) != Shown {
		t.Fatalf("Top returned %d values; want %d", len(got), Shown)
	}
	for i, r := range got[:3] {
		if r.Value != "1" && r.Value != "2" && r.Value != "3" {
			t.Fatalf("Top[%d] = %+v; want the heavy values 1, 2 and 3 first", i, r)
		}
		if r.Count > 100 || r.Count < 100-total/Capacity {
			t.Errorf("heavy value %s: %d chunks; want 100 at most, at least %d", r.Value, r.Count, 100-total/Capacity)
		}
	}
	for _, r := range got[3:] {
		if r.Count > 1 {
			t.Errorf("light value %s: %d chunks; want 1 at most (each was handed out once)", r.Value, r.Count)
		}
	}
}

// TestAddConcurrent: Add and Top from many goroutines (run with -race).
func TestAddConcurrent(t *testing.T) {
	t.Parallel()
	c := New(nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				c.Add("k", fmt.Sprint((g*1000+i)%300))
				if i%100 == 0 {
					c.Top(Shown)
				}
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, r := range c.Top(1000) {
		sum += r.Count
	}
	if sum == 0 || sum > 8000 {
		t.Errorf("counted %d hand-outs in all; want some, at most 8000", sum)
	}
}
