package queuer

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"opsq/queuer/identity"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestLiftThrottleEverywhereWhenAnswered (issue 33): a throttle lifted through one instance
// is in force on no instance by the time LiftThrottle returns, a reserve waiting on another
// instance for the value's chunks gets them at once, and lifting it again is
// ErrNoThrottle.
func TestLiftThrottleEverywhereWhenAnswered(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	// The lifter waits as long as the acknowledgements take on a busy machine: the test
	// checks that it waits for them, not how fast they come.
	q1 := startQueuerWith(t, pool, func(cfg *Config) { cfg.ThrottleAckWait = time.Minute })
	others := []*Queuer{startQueuer(t, pool), startQueuer(t, pool)}
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		for _, q := range append([]*Queuer{q1}, others...) {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	ctx := t.Context()
	for i := range 5 {
		value := fmt.Sprint(100 + i)
		values := map[string]string{"company_id": value}
		if _, err := q1.Throttle(ctx, "company_id", value, nil, time.Hour); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n, err := q1.LiftThrottle(ctx, "company_id", value, nil)
		if err != nil || n != 1 {
			t.Fatalf("round %d: lift: %d, %v; want 1 throttle lifted", i, n, err)
		}
		for j, q := range append([]*Queuer{q1}, others...) {
			if q.throttle.Blocks(values, "default") {
				t.Fatalf("round %d: instance %d still holds the throttle of company_id = %s when the lift returned (after %s)",
					i, j+1, value, time.Since(start))
			}
		}
		if _, err := q1.LiftThrottle(ctx, "company_id", value, nil); !errors.Is(err, ErrNoThrottle) {
			t.Fatalf("round %d: lifting a lifted throttle: %v; want ErrNoThrottle", i, err)
		}
	}

	// A reserve waiting on another instance is served at the lift, not at its wait's end.
	if _, err := q1.Throttle(ctx, "company_id", "7", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Enough chunks that each instance's own shards hold some: the waiting reserve is served
	// from its instance's shards, not by a forward (these queuers advertise no address).
	submitN(t, q1, 200, NewSubmission{StrategicMetadata: json.RawMessage(`{"company_id": 7}`)})
	got := make(chan int, 1)
	go func() {
		chunks, err := others[0].Reserve(ctx, ReserveRequest{Max: 1, Lease: time.Minute, Wait: 30 * time.Second, Strategy: strategy.Default})
		if err != nil {
			t.Error(err)
		}
		got <- len(chunks)
	}()
	select {
	case n := <-got:
		t.Fatalf("a reserve of a throttled value answered %d chunks before the lift", n)
	case <-time.After(500 * time.Millisecond):
	}
	lifted := time.Now()
	if _, err := q1.LiftThrottle(ctx, "company_id", "7", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != 1 {
			t.Errorf("the waiting reserve got %d chunks after the lift; want 1", n)
		}
		if d := time.Since(lifted); d > 10*time.Second {
			t.Errorf("the waiting reserve was served %s after the lift; want soon after", d)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the waiting reserve was not served after the lift")
	}
}

// TestLiftThrottleWithinTenants: a lift in some tenants ends their throttles only; "" names
// the throttle of every tenant; nil lifts all of them.
func TestLiftThrottleWithinTenants(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	ctx := t.Context()
	values := map[string]string{"company_id": "7"}
	for _, tenants := range [][]string{{"ta", "tb"}, nil} {
		if _, err := q.Throttle(ctx, "company_id", "7", tenants, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.LiftThrottle(ctx, "company_id", "7", []string{"tc"}); !errors.Is(err, ErrNoThrottle) {
		t.Errorf("lift in tc: %d, %v; want ErrNoThrottle", n, err)
	}
	if n, err := q.LiftThrottle(ctx, "company_id", "7", []string{"ta"}); err != nil || n != 1 {
		t.Errorf("lift in ta: %d, %v; want 1", n, err)
	}
	if n, err := q.LiftThrottle(ctx, "company_id", "7", []string{""}); err != nil || n != 1 {
		t.Errorf("lift of every tenant's: %d, %v; want 1", n, err)
	}
	if q.throttle.Blocks(values, "ta") || !q.throttle.Blocks(values, "tb") {
		t.Errorf("after lifting ta's and every tenant's: ta blocked %t, tb blocked %t; want only tb's", q.throttle.Blocks(values, "ta"), q.throttle.Blocks(values, "tb"))
	}
	if n, err := q.LiftThrottle(ctx, "company_id", "7", nil); err != nil || n != 1 {
		t.Errorf("lift in every tenant: %d, %v; want 1 (tb's)", n, err)
	}
	if q.throttle.Blocks(values, "tb") {
		t.Error("tb's throttle holds after a lift in every tenant")
	}
}

// TestThrottleSetterAndKeyBound: a throttle names the API key that set it and when; one
// key may have MaxThrottlesPerKey throttles in force, and its next is refused naming the
// key, while another key of the same tenant may still set its own, and setting one of
// its own again is no new throttle.
func TestThrottleSetterAndKeyBound(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	ctx := t.Context()
	c1 := identity.With(ctx, identity.Caller{Name: "c1", Role: "consumer", Tenants: []string{"ta"}, Limited: true})
	c2 := identity.With(ctx, identity.Caller{Name: "c2", Role: "consumer", Tenants: []string{"ta"}, Limited: true})
	before := time.Now().Add(-time.Minute)
	for i := range MaxThrottlesPerKey {
		if _, err := q.Throttle(c1, "company_id", fmt.Sprint(i), []string{"ta"}, time.Hour); err != nil {
			t.Fatalf("throttle %d of c1: %v", i+1, err)
		}
	}
	_, err := q.Throttle(c1, "company_id", "-1", []string{"ta"}, time.Hour)
	var limit *ThrottleLimitError
	if !errors.As(err, &limit) || limit.Scope != "key" || limit.Name != "c1" || limit.Max != MaxThrottlesPerKey {
		t.Fatalf("c1's throttle past its bound: %v; want a ThrottleLimitError of the key c1 at %d", err, MaxThrottlesPerKey)
	}
	if _, err := q.Throttle(c1, "company_id", "0", []string{"ta"}, 2*time.Hour/3); err != nil {
		t.Errorf("c1 setting one of its throttles again: %v; want no refusal (it is no new throttle)", err)
	}
	if _, err := q.Throttle(c2, "company_id", "-1", []string{"ta"}, time.Hour); err != nil {
		t.Errorf("c2's first throttle in ta: %v; want it set", err)
	}
	var found bool
	for _, th := range q.ThrottlesInForce() {
		if th.Value == "-1" {
			found = true
			if th.SetBy != "c2" || th.SetAt.Before(before) || th.Tenant != "ta" {
				t.Errorf("c2's throttle lists set by %q at %s in %q; want c2, now, ta", th.SetBy, th.SetAt, th.Tenant)
			}
		}
	}
	if !found {
		t.Error("c2's throttle is not in force")
	}
}
