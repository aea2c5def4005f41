package reserver

import (
	"slices"
	"strings"
	"testing"
)

// TestConsumers: each consumer name with live reservations is summed up, its oldest and
// newest lease follow releases, and a name without reservations is forgotten.
func TestConsumers(t *testing.T) {
	t.Parallel()
	res := func(token string, idx int32, consumer string, reservedAt int) Reservation {
		r := mk(token, 1, idx, int(idx)%4, 100)
		r.Consumer, r.ReservedAt = consumer, at(reservedAt)
		return r
	}
	r := setup(t, res("a1", 0, "a", 1), res("b1", 1, "b", 2), res("a2", 2, "a", 3), res("a3", 3, "a", 4), res("x", 4, "", 5))
	summary := func() string {
		var out []string
		for _, c := range r.Consumers() {
			out = append(out, c.Consumer+":"+string(rune('0'+c.Inflight))+":"+c.OldestReservedAt.Sub(t0).String()+"-"+c.NewestReservedAt.Sub(t0).String())
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got, want := summary(), ":1:5s-5s a:3:1s-4s b:1:2s-2s"; got != want {
		t.Errorf("Consumers: %s; want %s", got, want)
	}
	r.Release("a1")
	r.Release("a3")
	r.Release("b1")
	checkInvariants(t, r)
	if got, want := summary(), ":1:5s-5s a:1:3s-3s"; got != want {
		t.Errorf("Consumers after releases: %s; want %s", got, want)
	}
	r.DropShard(2)
	r.TakeExpired(at(200), at(300))
	r.Release("x")
	checkInvariants(t, r)
	if got := r.Consumers(); len(got) != 0 {
		t.Errorf("Consumers with nothing reserved: %v; want none", got)
	}
}
