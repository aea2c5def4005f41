package strategy

import (
	"fmt"

	opsqsql "opsq/sql"
)

// Filter restricts candidates to the submissions whose strategic metadata has Key = Value
// (select_only). Value is the canonical JSON text of the value. With Values set instead,
// Key may have any of them (a consumer limited to some tenants, TenantFilter).
type Filter struct {
	Key    string
	Value  []byte
	Values [][]byte
}

// TenantKey is the strategic metadata key of a submission's tenant: "@tenant" in any
// block that takes a key.
const TenantKey = "@tenant"

// TenantFilter restricts candidates to the submissions of tenants (at least one).
func TenantFilter(tenants []string) Filter {
	if len(tenants) == 1 {
		return Filter{Key: TenantKey, Value: valueJSON(StringValue(tenants[0]))}
	}
	f := Filter{Key: TenantKey, Values: make([][]byte, len(tenants))}
	for i, t := range tenants {
		f.Values[i] = valueJSON(StringValue(t))
	}
	return f
}

// Each calls fn with each value the filter lets through.
func (f Filter) Each(fn func(value []byte)) {
	if f.Values == nil {
		fn(f.Value)
		return
	}
	for _, v := range f.Values {
		fn(v)
	}
}

// Filter is the filter of a select_only node: its key, and its value's canonical JSON text.
func (n Node) Filter() Filter {
	return Filter{Key: n.Key, Value: valueJSON(n.Value)}
}

// CandidateQuery returns the SQL that reads one batch of a leaf's candidates over the
// instance's shards, restricted by filters, and the arguments of the filters. The query
// streams: a Merge Append of one ordered index scan per shard (random, oldest_first,
// newest_first), or the in-progress submissions in priority order each joined to its own
// chunks' ordered scan (custom_priority); a filter is a probe of the strategic metadata
// primary key per row (or per submission). The shards are bound in the returned arguments;
// the query text depends only on the leaf, the number of filters and of shards, so that
// instances can keep one generic plan of each (a custom plan of a query over tens of
// shards costs milliseconds to make). The caller binds the keyset arguments:
//
//	@limit int,
//	@after_order int, @before_order int (random),
//	@after_priority bigint (custom_priority: the negated priority),
//	@after_submission bigint, @after_chunk int.
//
// Every query returns submission_id, chunk_index, shard, retries, attempt_base, input,
// random_order, sort_priority and ctid (the row's address, sql.RowAddr).
func CandidateQuery(leaf Kind, filters []Filter, shards []int32) (string, map[string]any) {
	order := opsqsql.CandidatesRandom
	switch leaf {
	case OldestFirst:
		order = opsqsql.CandidatesOldestFirst
	case NewestFirst:
		order = opsqsql.CandidatesNewestFirst
	case CustomPriority:
		order = opsqsql.CandidatesCustomPriority
	}
	return candidateQuery(order, filters, shards)
}

// SubmissionQuery returns the SQL that reads one batch of one submission's candidates over
// the instance's shards, in chunk order (a Merge Append of per-shard primary-key range
// scans), restricted by filters. It binds @only_submission, @after_chunk and @limit like
// CandidateQuery, and returns the same columns. select_only scans the few submissions that
// have its value this way.
func SubmissionQuery(filters []Filter, shards []int32) (string, map[string]any) {
	return candidateQuery(opsqsql.CandidatesSubmission, filters, shards)
}

// candidateQuery is the query of order (its text sql's) with the shards and the filters
// bound: the shards one argument each, shard_0, shard_1, … (each the argument of its own
// branch of the query on one PostgreSQL, sql.CandidateQuery; on Citus an IN list of
// them, as before), each filter's key and value(s) as filter_key_i and filter_value_i.
func candidateQuery(order opsqsql.CandidateOrder, filters []Filter, shards []int32) (string, map[string]any) {
	args := make(map[string]any, len(shards)+2*len(filters))
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = fmt.Sprintf("shard_%d", i)
		args[names[i]] = s
	}
	fs := make([]opsqsql.CandidateFilter, len(filters))
	for i, f := range filters {
		fs[i] = opsqsql.CandidateFilter{KeyArg: fmt.Sprintf("filter_key_%d", i), ValueArg: fmt.Sprintf("filter_value_%d", i)}
		args[fs[i].KeyArg] = f.Key
		if f.Values != nil {
			values := make([]string, len(f.Values))
			for j, v := range f.Values {
				values[j] = string(v)
			}
			args[fs[i].ValueArg], fs[i].Many = values, true
		} else {
			args[fs[i].ValueArg] = string(f.Value)
		}
	}
	return opsqsql.CandidateQuery(order, names, fs), args
}
