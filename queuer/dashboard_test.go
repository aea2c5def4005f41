package queuer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"opsq/sql/pgtest"
	"opsq/strategy"
)

// TestOverview: the dashboard's overview counts the submissions in progress and their
// chunks left, and the completions between two overviews, those of a submission that
// finished in between included.
func TestOverview(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	before, err := q.Overview(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if before.InProgress != 0 || before.ChunksLeft != 0 || before.OldestID != nil {
		t.Fatalf("empty queue: overview %+v; want nothing in progress", before)
	}
	small := submitN(t, q, 2, NewSubmission{})
	big := submitN(t, q, 50, NewSubmission{})
	o, err := q.Overview(t.Context(), &before.Now)
	if err != nil {
		t.Fatal(err)
	}
	if o.InProgress != 2 || o.ChunksLeft != 52 || o.OldestID == nil || *o.OldestID != small {
		t.Fatalf("after two submissions: overview %+v; want 2 in progress, 52 chunks left, the oldest %d", o, small)
	}
	// Oldest first: small's 2 chunks, then 3 of big; completing them finishes small.
	chunks := reserveN(t, q, ReserveRequest{Max: 5, Strategy: strategy.Node{Kind: strategy.OldestFirst}})
	if len(chunks) != 5 {
		t.Fatalf("reserved %d chunks; want 5", len(chunks))
	}
	for _, c := range chunks {
		if _, err := q.Complete(t.Context(), []Completion{{Token: c.Token, Output: []byte("ok")}}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := q.Overview(t.Context(), &o.Now)
	if err != nil {
		t.Fatal(err)
	}
	if after.InProgress != 1 || after.ChunksLeft != 47 || after.OldestID == nil || *after.OldestID != big {
		t.Errorf("after completing 5: overview %+v; want 1 in progress, 47 chunks left, the oldest %d", after, big)
	}
	if got := after.Completed(o); got != 5 {
		t.Errorf("Completed between the two overviews = %d; want 5 (%+v, then %+v)", got, o, after)
	}
}

// TestOverviewPhases: the overview counts the paused and the scheduled submissions apart
// from the running ones, with their chunks left; the oldest submission it names is the
// oldest running one, and a resumed submission runs again.
func TestOverviewPhases(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, _ := setup(t)
	paused := submitN(t, q, 3, NewSubmission{})
	soon, later := time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	submitN(t, q, 5, NewSubmission{Lifecycle: Lifecycle{NotBefore: later}})
	submitN(t, q, 7, NewSubmission{Lifecycle: Lifecycle{NotBefore: soon}})
	running := submitN(t, q, 11, NewSubmission{})
	submitN(t, q, 13, NewSubmission{Lifecycle: Lifecycle{NotBefore: time.Now().Add(-time.Minute)}})
	if _, err := q.Pause(ctx, paused); err != nil {
		t.Fatal(err)
	}
	o, err := q.Overview(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("running %d (%d chunks), paused %d (%d), scheduled %d (%d)",
		o.Running, o.RunningChunksLeft, o.Paused, o.PausedChunksLeft, o.Scheduled, o.ScheduledChunksLeft)
	if want := "running 2 (24 chunks), paused 1 (3), scheduled 2 (12)"; got != want {
		t.Errorf("overview: %s; want %s", got, want)
	}
	if o.OldestID == nil || *o.OldestID != running {
		t.Errorf("oldest running: %v; want %d (the paused %d is older, and held)", o.OldestID, running, paused)
	}
	if o.NextScheduledAt == nil || o.NextScheduledAt.Sub(soon).Abs() > time.Millisecond {
		t.Errorf("next scheduled at %v; want %v", o.NextScheduledAt, soon)
	}
	if o.InProgress != 5 {
		t.Errorf("in progress %d; want all 5, whatever their phase", o.InProgress)
	}
	if _, err := q.Resume(ctx, paused); err != nil {
		t.Fatal(err)
	}
	if o, err = q.Overview(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if o.Running != 3 || o.Paused != 0 || o.OldestID == nil || *o.OldestID != paused {
		t.Errorf("after Resume: running %d, paused %d, oldest %v; want 3, 0, %d", o.Running, o.Paused, o.OldestID, paused)
	}
}

// TestActivity: the activity an instance writes is what the dashboard reads back — the
// completions and failed attempts of the current minute, who holds what since when — and
// a slot of the ring that holds a minute a day old starts again from zero.
func TestActivity(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, pool, clock := setupClock(t)
	submitN(t, q, 10, NewSubmission{})
	w1 := reserveN(t, q, ReserveRequest{Max: 3, Consumer: "host-1/pid-7", Lease: time.Hour}) // past the clock moved by hand
	clock.Add(90 * time.Second)
	reserveN(t, q, ReserveRequest{Max: 1, Consumer: "host-1/pid-7", Lease: time.Hour})
	reserveN(t, q, ReserveRequest{Max: 2, Consumer: "host-2/pid-9", Lease: time.Hour})
	if _, err := q.Complete(ctx, []Completion{{Token: w1[0].Token, Output: []byte("ok")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Fail(ctx, []Failure{{Token: w1[1].Token, Error: "boom", Retry: true}}); err != nil {
		t.Fatal(err)
	}
	q.activity.Write(ctx)

	minutes, now, err := q.Minutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(minutes) != 1 || minutes[0].Completed != 1 || minutes[0].Failed != 1 || now.Sub(minutes[0].At) > time.Minute {
		t.Errorf("minutes: %+v (now %v); want one, this minute's, with 1 completed and 1 failed", minutes, now)
	}
	consumers, err := q.Consumers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range consumers {
		oldest := "-"
		if c.OldestLeaseAge != nil {
			oldest = c.OldestLeaseAge.Round(30 * time.Second).String()
		}
		got = append(got, fmt.Sprintf("%s:%d:%s:%v", c.Name, c.Inflight, oldest, c.LastSeenAge < 30*time.Second))
	}
	if want := []string{"host-1/pid-7:2:1m30s:true", "host-2/pid-9:2:0s:true"}; !slices.Equal(got, want) {
		t.Errorf("consumers: %v; want %v (name:in flight:oldest lease:seen lately)", got, want)
	}

	// Nothing new counted: no write. A day later the slot starts again.
	q.activity.Write(ctx)
	if _, err := pool.Exec(ctx, "UPDATE opsq.activity_minutes SET minute = minute - interval '1 day'"); err != nil {
		t.Fatal(err)
	}
	if minutes, _, err := q.Minutes(ctx); err != nil || len(minutes) != 0 {
		t.Errorf("minutes after a day: %+v (%v); want none", minutes, err)
	}
	if _, err := q.Complete(ctx, []Completion{{Token: w1[2].Token, Output: []byte("ok")}}); err != nil {
		t.Fatal(err)
	}
	q.activity.Write(ctx)
	if minutes, _, err := q.Minutes(ctx); err != nil || len(minutes) != 1 || minutes[0].Completed != 1 || minutes[0].Failed != 0 {
		t.Errorf("minutes after a day and one completion: %+v (%v); want one with 1 completed, 0 failed", minutes, err)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.activity_minutes"); n != 1 {
		t.Errorf("%d rows in the ring; want 1", n)
	}
}

// TestValueRates: the chunks handed out under a rate_limit, a weighted_fair and a
// throttle are counted per value of their keys, and nothing of the keys no strategy
// limits; each instance publishes its top values with its activity, and the overview's
// rates add up the instances'.
func TestValueRates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q1, pool := setup(t)
	q2 := startQueuer(t, pool)
	submitN(t, q1, 40, sm(`{"company_id": 1, "mode": "full"}`))
	submitN(t, q1, 40, sm(`{"company_id": 2, "mode": "full", "region": "eu"}`))
	submitN(t, q1, 20, sm(`{"region": "us"}`))
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		return len(q1.claims.Reservable()) > 0 && len(q2.claims.Reservable()) > 0
	})

	// Under a rate_limit of company_id, from both instances: 6 of company 1.
	for _, q := range []*Queuer{q1, q2} {
		for range 3 {
			if got := reserveText(t, q, "rate_limit(company_id, 1000/s, 1000, select_only(company_id=1, random))", 1); len(got) != 1 {
				t.Fatalf("rate_limit reserve got %d chunks; want 1", len(got))
			}
		}
	}
	// Under a weighted_fair of company_id on q1: 4 more, spread over companies 1 and 2.
	fair := map[string]int{}
	for _, c := range reserveText(t, q1, "weighted_fair(company_id, {1: 1, 2: 1}, 1, select_only(mode=full, random))", 4) {
		var m struct {
			CompanyID int `json:"company_id"`
		}
		if err := json.Unmarshal(c.StrategicMetadata, &m); err != nil {
			t.Fatal(err)
		}
		fair[fmt.Sprint(m.CompanyID)]++
	}
	// A throttle of region = "asia": the chunks handed out are counted per region, under
	// any strategy.
	if _, err := q1.Throttle(ctx, "region", `"asia"`, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := q2.throttle.Load(ctx); err != nil {
		t.Fatal(err)
	}
	regions := map[string]int{}
	for _, c := range reserveText(t, q2, "random", 5) {
		var m struct{ Region string }
		if err := json.Unmarshal(c.StrategicMetadata, &m); err != nil {
			t.Fatal(err)
		}
		if m.Region != "" {
			regions[`"`+m.Region+`"`]++
		}
	}
	q1.activity.Write(ctx)
	q2.activity.Write(ctx)

	rates, err := q1.ValueRates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rates {
		got[r.Key+"="+r.Value] = r.Count
		if r.PerS <= 0 || r.PerS > float64(r.Count)*2 {
			t.Errorf("%s = %s: %.2f/s for %d chunks; want more than 0, at most %d/s (the window is at least half a second)", r.Key, r.Value, r.PerS, r.Count, r.Count*2)
		}
	}
	want := map[string]int64{"company_id=1": int64(6 + fair["1"]), "company_id=2": int64(fair["2"])}
	for region, n := range regions {
		want["region="+region] = int64(n)
	}
	for k, n := range want {
		if n == 0 {
			delete(want, k)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("values' rates: %v; want %v (nothing of mode, which no strategy limits)", got, want)
	}
}

// TestChunk: the chunk page's reading of one chunk says where it is and what it holds —
// a completed chunk's output, a failed one's input, last error and attempts (with their
// consumer), a pending one's input, a waiting one's time, a paused one's none — and an
// index past the submission's chunks is ErrNotFound.
func TestChunk(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, _ := setup(t)
	one := 1
	id := submitN(t, q, 4, NewSubmission{MaxRetries: &one, Lifecycle: Lifecycle{Policy: FailurePolicy{Continue: true}, Backoff: Backoff{Initial: time.Hour, Factor: 1, Max: time.Hour}}})
	byIndex := map[int32]Chunk{}
	for _, c := range reserveN(t, q, ReserveRequest{Max: 4, Consumer: "host-7", Strategy: strategy.Node{Kind: strategy.OldestFirst}}) {
		byIndex[c.ChunkIndex] = c
	}
	if len(byIndex) != 4 {
		t.Fatalf("reserved %d chunks; want 4", len(byIndex))
	}
	if _, err := q.Complete(ctx, []Completion{{Token: byIndex[0].Token, Output: []byte("out-0")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Fail(ctx, []Failure{{Token: byIndex[1].Token, Error: "boom <1>", Retry: false}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Fail(ctx, []Failure{{Token: byIndex[2].Token, Error: "later", Retry: true}}); err != nil {
		t.Fatal(err)
	}
	// Chunk 3 stays reserved: pending, as the database has it.
	for _, tc := range []struct {
		index int64
		want  string
	}{
		{0, `completed retries 0 input -1 "" output 5 "out-0" error "" errors []`},
		{1, `failed retries 0 input 7 "chunk-1" output -1 "" error "boom <1>" errors [boom <1> by host-7]`},
		{2, `waiting retries 1 input 7 "chunk-2" output -1 "" error "" errors [later by host-7]`},
		{3, `pending retries 0 input 7 "chunk-3" output -1 "" error "" errors []`},
	} {
		c, err := q.Chunk(ctx, id, tc.index)
		if err != nil {
			t.Fatalf("chunk %d: %v", tc.index, err)
		}
		var errs []string
		for _, e := range c.Errors {
			errs = append(errs, e.Error+" by "+e.Consumer)
		}
		got := fmt.Sprintf("%s retries %d input %d %q output %d %q error %q errors %v", c.State, c.Retries, c.InputSize, c.Input, c.OutputSize, c.Output, c.Error, errs)
		if got != tc.want {
			t.Errorf("chunk %d: %s; want %s", tc.index, got, tc.want)
		}
		if tc.index == 2 && (c.ReadyAt == nil || time.Until(*c.ReadyAt) < 30*time.Minute) {
			t.Errorf("chunk 2 waits until %v; want about an hour from now (its backoff)", c.ReadyAt)
		}
	}
	if _, err := q.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if c, err := q.Chunk(ctx, id, 2); err != nil || c.State != "waiting" || c.ReadyAt != nil {
		t.Errorf("chunk 2 of the paused submission: %s until %v (%v); want waiting until resumed (nil)", c.State, c.ReadyAt, err)
	}
	for _, index := range []int64{4, -1} {
		if _, err := q.Chunk(ctx, id, index); !errors.Is(err, ErrNotFound) {
			t.Errorf("chunk %d of 4: %v; want ErrNotFound", index, err)
		}
	}
	if _, err := q.Chunk(ctx, id+1, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("a chunk of an unknown submission: %v; want ErrNotFound", err)
	}
}
