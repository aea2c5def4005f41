package queuer

import (
	"context"
	"slices"

	"opsq/queuer/internal/submissions"
	"opsq/queuer/internal/tokens"
)

// QuotaError is a submission refused because it would take its tenant past a quota.
type QuotaError = submissions.QuotaError

// MoveBusyError is a pause or resume refused: another of the same submission is moving its
// chunks, or the caller moved Config.MaxPauseChunksPerMinute chunks in the last minute.
type MoveBusyError = submissions.MoveBusyError

// TenantDefault is the tenant of a submission that names none.
const TenantDefault = submissions.TenantDefault

// OutsideTenants reports, for each of toks, whether it names a chunk of a submission that
// belongs to none of tenants: for a key limited to tenants, such a token is "unknown"
// (DESIGN.md §8), and nothing is done with it. A token that does not parse, or names a
// submission opsq no longer knows, is not outside: the engine answers it as it answers
// any caller. The tenants of submissions are cached (they never change), so a consumer
// that completes the chunks it reserved costs no database read after the first.
func (q *Queuer) OutsideTenants(ctx context.Context, toks []string, tenants []string) ([]bool, error) {
	out := make([]bool, len(toks))
	ids := make([]int64, len(toks))
	var want []int64
	seen := map[int64]bool{}
	for i, s := range toks {
		t, err := tokens.Parse(s)
		if err != nil {
			continue
		}
		ids[i] = t.Key.SubmissionID
		if !seen[ids[i]] {
			seen[ids[i]] = true
			want = append(want, ids[i])
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	of, err := q.subs.TenantsOf(ctx, want)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if t, ok := of[id]; ok && id != 0 {
			out[i] = !slices.Contains(tenants, t)
		}
	}
	return out, nil
}
