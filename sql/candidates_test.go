package sql

import (
	"strings"
	"testing"
)

// TestCandidateQueryLayouts: on one PostgreSQL a candidate query of several shards is a
// merge of one branch per shard (custom_priority aside), and on Citus the skeleton with
// the shards in its IN list, as it was before chunks became one table (migration 00026);
// custom_priority's there is the first of its steps.
// Not parallel: it sets the process's layout, which parallel tests read.
func TestCandidateQueryLayouts(t *testing.T) {
	defer onCitus.Store(onCitus.Load())
	shards := []string{"a", "b", "c"}
	orders := map[string]CandidateOrder{"random": CandidatesRandom, "oldest_first": CandidatesOldestFirst,
		"newest_first": CandidatesNewestFirst, "custom_priority": CandidatesCustomPriority, "submission": CandidatesSubmission}
	for name, order := range orders {
		inList := strings.NewReplacer("/*shards*/", "@a::int, @b::int, @c::int", "/*filters*/", "").Replace(candidateSkeletons[order])

		onCitus.Store(true)
		want := inList
		if order == CandidatesCustomPriority { // the first of its steps (candidates_custom_priority_citus.sql)
			want = strings.NewReplacer("/*shards*/", "@a::int, @b::int, @c::int", "/*filters*/", "").Replace(customPriorityCitus[0])
			if !strings.HasPrefix(want, customPriorityCitusPrefix) || strings.HasPrefix(inList, customPriorityCitusPrefix) {
				t.Errorf("customPriorityCitusPrefix %q must begin the Citus step and no other candidate query", customPriorityCitusPrefix)
			}
		}
		if got := CandidateQuery(order, shards, nil); got != want {
			t.Errorf("%s on Citus: got\n%s\nwant\n%s", name, got, want)
		}

		onCitus.Store(false)
		got := CandidateQuery(order, shards, nil)
		if order == CandidatesCustomPriority {
			if got != inList {
				t.Errorf("%s on one PostgreSQL: got\n%s\nwant the IN form\n%s", name, got, inList)
			}
			continue
		}
		if n := strings.Count(got, "UNION ALL"); n != 2 || strings.Contains(got, " IN (") {
			t.Errorf("%s on one PostgreSQL: %d UNION ALLs, IN list %v; want 3 branches and no IN list\n%s",
				name, n, strings.Contains(got, " IN ("), got)
		}
		for _, s := range shards {
			if !strings.Contains(got, "WHERE c.shard = @"+s+"::int\n") {
				t.Errorf("%s on one PostgreSQL: no branch of shard %s\n%s", name, s, got)
			}
		}
		if one := CandidateQuery(order, shards[:1], nil); strings.Contains(one, "UNION") {
			t.Errorf("%s of one shard on one PostgreSQL: got\n%s\nwant the skeleton alone", name, one)
		}
	}
}
