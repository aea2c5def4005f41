package queuer

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"opsq/sql/pgtest"
	"opsq/strategy"
)

func sm(s string) NewSubmission { return NewSubmission{StrategicMetadata: json.RawMessage(s)} }

// parseStrategy parses a strategy's text form, failing the test if it does not parse
// (queuertest.Strategy, for queuer's own tests).
func parseStrategy(t *testing.T, text string) strategy.Node {
	t.Helper()
	n, err := strategy.ParseText(text)
	if err != nil {
		t.Fatalf("strategy %q: %v", text, err)
	}
	return n
}

func reserveText(t *testing.T, q *Queuer, text string, max int) []Chunk {
	t.Helper()
	return reserveN(t, q, ReserveRequest{Max: max, Strategy: parseStrategy(t, text)})
}

func TestCustomPriority(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	low := submitN(t, q, 2, NewSubmission{Priority: 1})
	high := submitN(t, q, 2, NewSubmission{Priority: 5})
	high2 := submitN(t, q, 2, NewSubmission{Priority: 5})
	mid := submitN(t, q, 2, NewSubmission{Priority: 3})
	var got []int64
	for range 8 {
		c := reserveText(t, q, "custom_priority", 1)
		if len(c) != 1 {
			t.Fatalf("custom_priority gave %d chunks; want 1", len(c))
		}
		got = append(got, c[0].SubmissionID)
	}
	want := []int64{high, high, high2, high2, mid, mid, low, low}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("custom_priority order %v; want %v (priority high to low, then oldest)", got, want)
	}
}

// custom_priority over more submissions than one candidate batch reads (its @limit), with
// ties: every chunk handed out once, in priority order (high first), then submission id,
// then chunk index, across the batches' keyset paging. On Citus (the queuer's Citus list)
// the candidate query runs in steps (candidates_custom_priority_citus.sql): the same order.
func TestCustomPriorityPagesAcrossSubmissions(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	type key struct {
		prio int64
		id   int64
	}
	var want []key
	prioOf := map[int64]int64{}
	for i := range 150 {
		prio := int64(i % 7) // ties: ~21 submissions per priority
		id := submitN(t, q, 2, NewSubmission{Priority: prio})
		prioOf[id] = prio
		want = append(want, key{-prio, id}, key{-prio, id})
	}
	slices.SortFunc(want, func(a, b key) int { return cmp.Or(cmp.Compare(a.prio, b.prio), cmp.Compare(a.id, b.id)) })
	var got []key
	var idx []int32
	for len(got) < len(want) {
		c := reserveText(t, q, "custom_priority", 7)
		if len(c) == 0 {
			t.Fatalf("custom_priority gave nothing after %d of %d chunks", len(got), len(want))
		}
		for _, ch := range c {
			got = append(got, key{-prioOf[ch.SubmissionID], ch.SubmissionID})
			idx = append(idx, ch.ChunkIndex)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("custom_priority handed out (negated priority, submission) %v; want %v", got, want)
	}
	for i := 0; i < len(idx); i += 2 {
		if idx[i] != 0 || idx[i+1] != 1 {
			t.Fatalf("submission %d's chunks handed out as %d, %d; want 0, 1", got[i].id, idx[i], idx[i+1])
		}
	}
}

func TestSelectOnly(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	preview := submitN(t, q, 20, sm(`{"mode": "preview"}`))
	submitN(t, q, 20, sm(`{"mode": "full"}`))
	submitN(t, q, 20, sm(`{"other": 1}`))
	seen := 0
	for _, leaf := range []string{"random", "oldest_first", "newest_first", "custom_priority"} {
		for _, c := range reserveText(t, q, "select_only(mode=preview, "+leaf+")", 5) {
			if c.SubmissionID != preview {
				t.Fatalf("select_only(mode=preview, %s) returned a chunk of %d; want only %d", leaf, c.SubmissionID, preview)
			}
			seen++
		}
	}
	if seen != 20 {
		t.Fatalf("select_only handed out %d preview chunks; want all 20", seen)
	}
	if c := reserveText(t, q, "select_only(mode=preview, random)", 5); len(c) != 0 {
		t.Fatalf("select_only with no matching chunk left returned %d chunks; want none", len(c))
	}
	if c := reserveText(t, q, `select_only(mode="nothing", random)`, 5); len(c) != 0 {
		t.Fatalf("select_only of a value nobody has returned %d chunks; want none", len(c))
	}
	if c := reserveText(t, q, "select_only(mode=full, select_only(other=1, random))", 5); len(c) != 0 {
		t.Fatalf("nested select_only that nothing matches returned %d chunks; want none", len(c))
	}
}

func TestPreferDistinct(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	var ids []int64
	for company := range 3 {
		ids = append(ids, submitN(t, q, 10, sm(fmt.Sprintf(`{"company_id": %d}`, company))))
	}
	// oldest_first alone would give three chunks of company 0; prefer_distinct spreads them.
	c := reserveText(t, q, "prefer_distinct(company_id, 1, oldest_first)", 3)
	got := map[int64]bool{}
	for _, ch := range c {
		got[ch.SubmissionID] = true
	}
	if len(c) != 3 || len(got) != 3 {
		t.Fatalf("prefer_distinct gave %d chunks of %d companies; want 3 of 3", len(c), len(got))
	}
	// Every company is saturated now: soft, so work is still handed out, oldest first.
	c = reserveText(t, q, "prefer_distinct(company_id, 1, oldest_first)", 2)
	if len(c) != 2 || c[0].SubmissionID != ids[0] {
		t.Fatalf("with every value saturated prefer_distinct gave %+v; want 2 chunks, the oldest first", c)
	}
}

func TestPreferDistinctSpreadsConcurrentConsumers(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	for company := range 8 {
		submitN(t, q, 30, sm(fmt.Sprintf(`{"company_id": %d}`, company)))
	}
	// 8 consumers hold one chunk each at the same time: with max 1 they hold 8 companies.
	var held []Chunk
	for range 8 {
		held = append(held, reserveText(t, q, "prefer_distinct(company_id, 1, oldest_first)", 1)...)
	}
	companies := map[string]bool{}
	for _, c := range held {
		companies[string(c.StrategicMetadata)] = true
	}
	if len(companies) != 8 {
		t.Fatalf("8 concurrent consumers hold chunks of %d companies; want 8", len(companies))
	}
}

func TestOrElse(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	other := submitN(t, q, 5, sm(`{"mode": "full"}`))
	preview := submitN(t, q, 3, sm(`{"mode": "preview"}`))
	c := reserveText(t, q, "or_else(select_only(mode=preview, random), random)", 5)
	if len(c) != 5 {
		t.Fatalf("or_else gave %d chunks; want 5", len(c))
	}
	for i, ch := range c {
		want := preview
		if i >= 3 {
			want = other
		}
		if ch.SubmissionID != want {
			t.Fatalf("or_else chunk %d from %d; want the 3 preview chunks first, then the fallback's", i, ch.SubmissionID)
		}
	}
}

// TestMaxSimultaneousAcrossInstances runs 3 instances on one database and 50 consumers
// against max_simultaneous(company_id, 3, random), and samples the chunks held per value
// all along: never more than 3 anywhere in the cluster.
func TestMaxSimultaneousAcrossInstances(t *testing.T) {
	t.Parallel()
	q1, pool := setup(t)
	instances := []*Queuer{q1, startQueuer(t, pool), startQueuer(t, pool)}
	const companies, perCompany = 5, 60
	for c := range companies {
		submitN(t, q1, perCompany, sm(fmt.Sprintf(`{"company_id": %d}`, c)))
	}
	// Wait for the shards to be split, so that every instance serves.
	pgtest.Eventually(t, 20*time.Second, "the instances split the shards", func() bool {
		for _, q := range instances {
			if len(q.claims.Reservable()) == 0 {
				return false
			}
		}
		return true
	})
	var mu sync.Mutex
	held := map[string]int{}
	peak := 0
	var done atomic.Int64
	tree := parseStrategy(t, "max_simultaneous(company_id, 3, random)")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 50 {
		q := instances[i%len(instances)]
		wg.Go(func() {
			for done.Load() < companies*perCompany && ctx.Err() == nil {
				chunks, err := q.Reserve(ctx, ReserveRequest{Max: 1 + i%3, Strategy: tree, Lease: time.Minute, Wait: 200 * time.Millisecond})
				if err != nil {
					if ctx.Err() == nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				for _, c := range chunks {
					k := string(c.StrategicMetadata)
					held[k]++
					peak = max(peak, held[k])
				}
				mu.Unlock()
				time.Sleep(time.Duration(10+rand.N(10)) * time.Millisecond) // the work
				items := make([]Completion, len(chunks))
				mu.Lock()
				for j, c := range chunks {
					held[string(c.StrategicMetadata)]-- // done with it before saying so
					items[j] = Completion{Token: c.Token}
				}
				mu.Unlock()
				if _, err := q.Complete(ctx, items); err != nil {
					t.Error(err)
					return
				}
				done.Add(int64(len(chunks)))
			}
		})
	}
	wg.Wait()
	if got := done.Load(); got != companies*perCompany {
		t.Fatalf("%d chunks done; want %d", got, companies*perCompany)
	}
	if peak > 3 {
		t.Fatalf("at some moment %d chunks of one company were held; want at most 3", peak)
	}
	if peak < 3 {
		t.Errorf("at most %d chunks of one company were ever held at once; the limit 3 was never reached, so the test proves little", peak)
	}
	if n := pgtest.Count(t, pool, "SELECT count(*) FROM opsq.simultaneous_holds"); n != 0 {
		t.Errorf("%d max_simultaneous holds left after every chunk completed; want 0", n)
	}
}

// TestSelectOnlyFindsRareWork puts a small preview submission behind a large backlog of
// other work: or_else(select_only(mode=preview, …), …) must serve the preview chunks first.
func TestSelectOnlyFindsRareWork(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 30_000, sm(`{"mode": "full"}`))
	preview := submitN(t, q, 5, sm(`{"mode": "preview"}`))
	for _, leaf := range []string{"random", "oldest_first", "newest_first", "custom_priority"} {
		c := reserveText(t, q, "or_else(select_only(mode=preview, "+leaf+"), random)", 1)
		if len(c) != 1 || c[0].SubmissionID != preview {
			t.Fatalf("with %s, or_else(select_only(mode=preview, …), random) gave %+v; want a preview chunk first", leaf, c)
		}
	}
	c := reserveText(t, q, "select_only(mode=preview, random)", 5)
	if len(c) != 1 {
		t.Fatalf("select_only gave %d chunks with 1 preview chunk left; want 1", len(c))
	}
}
