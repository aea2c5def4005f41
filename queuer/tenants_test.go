package queuer

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"opsq/queuer/opsqtype"
	"opsq/strategy"
)

// TestTenantSurvivesEveryMove: a submission's tenant moves with its row between the four
// submission tables — failed, retried, cancelled, retried again, completed — so a check
// on it holds after a retry (created_by_key was lost there).
func TestTenantSurvivesEveryMove(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	id := submitN(t, q, 3, NewSubmission{Tenant: "acme"})
	submitN(t, q, 2, NewSubmission{}) // the default tenant's
	expect := func(state opsqtype.State) {
		t.Helper()
		st, err := q.Status(t.Context(), id)
		if err != nil || st.State != state || st.Tenant != "acme" {
			t.Fatalf("status %+v, %v; want %s of tenant acme", st, err, state)
		}
		page, _, err := q.List(t.Context(), ListOptions{Tenant: "acme", Limit: 10})
		if err != nil || len(page) != 1 || page[0].ID != id {
			t.Fatalf("acme's list: %d submissions, %v; want %d only", len(page), err, id)
		}
	}
	expect(opsqtype.StateInProgress)
	mine := reserveN(t, q, ReserveRequest{Max: 10, Strategy: strategy.Node{Kind: strategy.OldestFirst}, Tenants: []string{"acme"}})
	if len(mine) != 3 {
		t.Fatalf("acme's consumer reserved %d chunks; want acme's 3", len(mine))
	}
	if st, err := q.Fail(t.Context(), []Failure{{Token: mine[0].Token, Error: "boom", Retry: false}}); err != nil || st[0] != opsqtype.StatusFailed {
		t.Fatalf("failing a chunk for good: %v, %v; want failed", st, err)
	}
	expect(opsqtype.StateFailed)
	if _, err := q.Retry(t.Context(), id, RetryOptions{Unfinished: true}); err != nil {
		t.Fatal(err)
	}
	expect(opsqtype.StateInProgress)
	if _, err := q.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	expect(opsqtype.StateCancelled)
	if _, err := q.Retry(t.Context(), id, RetryOptions{Unfinished: true}); err != nil {
		t.Fatal(err)
	}
	expect(opsqtype.StateInProgress)
	again := reserveN(t, q, ReserveRequest{Max: 10, Strategy: strategy.Node{Kind: strategy.OldestFirst}, Tenants: []string{"acme"}})
	complete(t, q, again...)
	pgtestWaitState(t, q, id, opsqtype.StateCompleted)
	expect(opsqtype.StateCompleted)
	if tenants, err := q.TenantsOf(t.Context(), []int64{id, 999}); err != nil || len(tenants) != 1 || tenants[id] != "acme" {
		t.Errorf("TenantsOf: %v, %v; want acme's submission only", tenants, err)
	}
}

// pgtestWaitState waits until submission id is in state.
func pgtestWaitState(t *testing.T, q *Queuer, id int64, state opsqtype.State) {
	t.Helper()
	st, err := q.WaitFinished(t.Context(), id, 10e9)
	if err != nil || st.State != state {
		t.Fatalf("submission %d: %s, %v; want %s", id, st.State, err, state)
	}
}

// TestReserveWithinTenants: a reserve limited to some tenants gets their chunks only,
// under every leaf and wrapper, whether a tenant has many submissions in progress (its
// chunks found by the filtered scan) or few (scanned one submission at a time); preview
// too. A token of another tenant's chunk is outside.
func TestReserveWithinTenants(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	of := map[int64]string{}
	for i := range 70 { // beta: more than fewSubmissions
		of[submitN(t, q, 2, NewSubmission{Tenant: "beta", Priority: int64(i % 3), StrategicMetadata: []byte(`{"mode": "x"}`)})] = "beta"
	}
	for range 3 {
		of[submitN(t, q, 4, NewSubmission{Tenant: "alpha", StrategicMetadata: []byte(`{"mode": "x"}`)})] = "alpha"
		of[submitN(t, q, 4, NewSubmission{StrategicMetadata: []byte(`{"mode": "x"}`)})] = "default"
	}
	for _, tc := range []struct {
		tenants []string
		want    int
	}{{[]string{"alpha"}, 12}, {[]string{"beta"}, 140}, {[]string{"alpha", "default"}, 12}} { // alpha's are taken by then
		for _, text := range []string{"random", "oldest_first", "newest_first", "custom_priority", "select_only(mode=x, random)", "prefer_distinct(mode, 1, oldest_first)", "or_else(select_only(mode=y, random), random)"} {
			pv, err := q.Preview(t.Context(), ReserveRequest{Max: 1000, Strategy: parseStrategy(t, text), Tenants: tc.tenants})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range pv {
				if !slices.Contains(tc.tenants, of[c.SubmissionID]) {
					t.Fatalf("preview of %s within %v: a chunk of %s", text, tc.tenants, of[c.SubmissionID])
				}
			}
			if len(pv) != tc.want {
				t.Errorf("preview of %s within %v: %d chunks; want %d", text, tc.tenants, len(pv), tc.want)
			}
		}
		var got []Chunk
		for _, text := range []string{"random", "oldest_first", "custom_priority", "select_only(mode=x, newest_first)"} {
			got = append(got, reserveN(t, q, ReserveRequest{Max: tc.want / 4, Strategy: parseStrategy(t, text), Tenants: tc.tenants})...)
		}
		got = append(got, reserveN(t, q, ReserveRequest{Max: tc.want, Tenants: tc.tenants})...)
		for _, c := range got {
			if !slices.Contains(tc.tenants, of[c.SubmissionID]) {
				t.Fatalf("a reserve within %v got a chunk of %s", tc.tenants, of[c.SubmissionID])
			}
		}
		if len(got) != tc.want {
			t.Errorf("reserves within %v got %d chunks; want all %d of theirs", tc.tenants, len(got), tc.want)
		}
		if more := reserveN(t, q, ReserveRequest{Max: 10, Tenants: tc.tenants}); len(more) != 0 {
			t.Errorf("a reserve within %v after all were taken: %d chunks; want none", tc.tenants, len(more))
		}
		toks := []string{got[0].Token, "not-a-token"}
		out, err := q.OutsideTenants(t.Context(), toks, []string{"gamma"})
		if err != nil || !slices.Equal(out, []bool{true, false}) {
			t.Errorf("OutsideTenants for gamma: %v, %v; want [true false]", out, err)
		}
		if out, err := q.OutsideTenants(t.Context(), toks, tc.tenants); err != nil || slices.Contains(out, true) {
			t.Errorf("OutsideTenants for %v: %v, %v; want none outside", tc.tenants, out, err)
		}
	}
}

// TestTenantStrategyKey: "@tenant" is a key of select_only, prefer_distinct and
// max_simultaneous (DESIGN.md §5).
func TestTenantStrategyKey(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	acme := submitN(t, q, 5, NewSubmission{Tenant: "acme"})
	globex := submitN(t, q, 5, NewSubmission{Tenant: "globex"})
	leaf := &strategy.Node{Kind: strategy.OldestFirst}
	capped := strategy.Node{Kind: strategy.MaxSimultaneous, Key: strategy.TenantKey, Max: 4, Then: leaf}
	got := reserveN(t, q, ReserveRequest{Max: 10, Strategy: capped})
	n := map[int64]int{}
	for _, c := range got {
		n[c.SubmissionID]++
	}
	if n[acme] != 4 || n[globex] != 4 {
		t.Fatalf("max_simultaneous(@tenant, 4): %v; want 4 of acme's and 4 of globex's", n)
	}
	only := strategy.Node{Kind: strategy.SelectOnly, Key: strategy.TenantKey, Value: strategy.StringValue("globex"), Then: leaf}
	if got := reserveN(t, q, ReserveRequest{Max: 3, Strategy: only}); len(got) != 1 || got[0].SubmissionID != globex {
		t.Fatalf("select_only(@tenant=globex) got %d chunks (%v); want globex's last", len(got), got)
	}
	distinct := strategy.Node{Kind: strategy.PreferDistinct, Key: strategy.TenantKey, Max: 1, Then: leaf}
	acme2 := submitN(t, q, 3, NewSubmission{Tenant: "acme"})
	initech := submitN(t, q, 3, NewSubmission{Tenant: "initech"})
	if got := reserveN(t, q, ReserveRequest{Max: 2, Strategy: distinct}); len(got) != 2 || got[0].SubmissionID != initech {
		t.Fatalf("prefer_distinct(@tenant, 1) after acme's %d: %v; want initech's first, acme's and globex's being saturated", acme2, got)
	}
	if err := strategy.Node(capped).Validate(); err != nil {
		t.Errorf("max_simultaneous on @tenant does not validate: %v", err)
	}
}

// TestQuotaHoldsUnderConcurrentSubmits: a tenant's quota is checked one submission after
// another: of eight concurrent submissions under max_in_progress 3, three get in.
func TestQuotaHoldsUnderConcurrentSubmits(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO opsq.tenants (name, max_in_progress, max_pending_chunks) VALUES ('acme', 3, 100)`); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for range 8 {
		wg.Go(func() {
			_, err := q.Submit(t.Context(), NewSubmission{Tenant: "acme"}, &genChunks{n: 2, failAt: -1})
			var quota *QuotaError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.As(err, &quota) && quota.Quota == "max_in_progress":
				refused++
			default:
				t.Errorf("submit: %v; want success or a max_in_progress QuotaError", err)
			}
		})
	}
	wg.Wait()
	if ok != 3 || refused != 5 {
		t.Errorf("%d submissions in, %d refused; want 3 and 5", ok, refused)
	}
	_, err := q.Submit(t.Context(), NewSubmission{Tenant: "other"}, &genChunks{n: 2000, failAt: -1})
	if err != nil {
		t.Errorf("a tenant without quotas: %v", err)
	}
	if _, err := pool.Exec(t.Context(), `UPDATE opsq.tenants SET max_in_progress = NULL WHERE name = 'acme'`); err != nil {
		t.Fatal(err)
	}
	_, err = q.Submit(t.Context(), NewSubmission{Tenant: "acme"}, &genChunks{n: 95, failAt: -1})
	var quota *QuotaError
	if !errors.As(err, &quota) || quota.Quota != "max_pending_chunks" || quota.Have != 6 {
		t.Errorf("95 chunks over acme's 6 pending, max 100: %v; want a max_pending_chunks QuotaError", err)
	}
}

// TestReserveWithinRareTenant: a tenant whose chunks are too rare for the filtered scans to
// find within their bound (5 chunks behind 30 000 of another tenant's) still gets every
// one of them, at once: its few submissions are read one by one.
func TestReserveWithinRareTenant(t *testing.T) {
	t.Parallel()
	q, _ := setup(t)
	submitN(t, q, 30_000, NewSubmission{Tenant: "big"})
	rare := submitN(t, q, 5, NewSubmission{Tenant: "rare"})
	for _, text := range []string{"random", "oldest_first", "newest_first"} {
		got := reserveN(t, q, ReserveRequest{Max: 2, Strategy: parseStrategy(t, text), Tenants: []string{"rare"}})
		if len(got) == 0 {
			t.Fatalf("%s within rare: no chunk; want rare's", text)
		}
		for _, c := range got {
			if c.SubmissionID != rare {
				t.Fatalf("%s within rare: a chunk of %d", text, c.SubmissionID)
			}
		}
	}
}

// TestQuotaHoldsOnRetry (issue 31, finding 9): a retry that would take a tenant past a
// quota — a cancelled submission back in progress, or its chunks pending again — is
// refused with the QuotaError a submit gets, alone or in a bulk retry, and changes
// nothing; within the quotas it goes through.
func TestQuotaHoldsOnRetry(t *testing.T) {
	t.Parallel()
	q, pool := setup(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO opsq.tenants (name, max_in_progress, max_pending_chunks) VALUES ('acme', 1, 10)`); err != nil {
		t.Fatal(err)
	}
	a, err := q.Submit(t.Context(), NewSubmission{Tenant: "acme"}, &genChunks{n: 4, failAt: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Cancel(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(t.Context(), NewSubmission{Tenant: "acme"}, &genChunks{n: 4, failAt: -1}); err != nil {
		t.Fatal(err)
	}
	unfinished := RetryOptions{Unfinished: true}
	expectQuota := func(what, quota string, err error) {
		t.Helper()
		var qe *QuotaError
		if !errors.As(err, &qe) || qe.Quota != quota {
			t.Errorf("%s: %v; want a %s QuotaError", what, err, quota)
		}
		st, err := q.Status(t.Context(), a.ID)
		if err != nil || st.State != opsqtype.StateCancelled {
			t.Errorf("%s: the submission is %s (%v); want it still cancelled", what, st.State, err)
		}
	}
	_, err = q.Retry(t.Context(), a.ID, unfinished)
	expectQuota("retry of a cancelled submission, 1 in progress of max 1", "max_in_progress", err)
	ids, err := q.RetryMany(t.Context(), ListOptions{State: opsqtype.StateCancelled, Tenant: "acme", Limit: 10}, unfinished)
	expectQuota("bulk retry, 1 in progress of max 1", "max_in_progress", err)
	if len(ids) != 0 {
		t.Errorf("bulk retry over the quota retried %v; want none", ids)
	}

	if _, err := pool.Exec(t.Context(), `UPDATE opsq.tenants SET max_in_progress = NULL, max_pending_chunks = 7 WHERE name = 'acme'`); err != nil {
		t.Fatal(err)
	}
	_, err = q.Retry(t.Context(), a.ID, unfinished)
	expectQuota("retry of 4 chunks beside 4 pending, max 7", "max_pending_chunks", err)

	if _, err := pool.Exec(t.Context(), `UPDATE opsq.tenants SET max_pending_chunks = 8 WHERE name = 'acme'`); err != nil {
		t.Fatal(err)
	}
	if st, err := q.Retry(t.Context(), a.ID, unfinished); err != nil || st.State != opsqtype.StateInProgress {
		t.Errorf("retry of 4 chunks beside 4 pending, max 8: %s, %v; want it in progress", st.State, err)
	}
}
