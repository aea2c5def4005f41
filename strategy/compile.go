package strategy

import (
	"fmt"
	"strings"
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
// instances can keep one generic plan of each (planning a custom plan over tens of
// partitions costs milliseconds). The caller binds the keyset arguments:
//
//	@limit int,
//	@after_order int, @before_order int (random),
//	@after_priority bigint (custom_priority: the negated priority),
//	@after_submission bigint, @after_chunk int.
//
// Every query returns submission_id, chunk_index, shard, retries, attempt_base, input,
// random_order, sort_priority.
func CandidateQuery(leaf Kind, filters []Filter, shards []int32) (string, map[string]any) {
	args := map[string]any{}
	filter := filterSQL(filters, "c.submission_id", args)
	in := shardList(shards, args)
	const columns = "c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order"
	switch leaf {
	case OldestFirst:
		return `SELECT ` + columns + `, 0::bigint AS sort_priority
FROM opsq.chunks c
WHERE c.shard IN (` + in + `)
  AND (c.submission_id, c.chunk_index) > (@after_submission::bigint, @after_chunk::int)` + filter + `
ORDER BY c.submission_id, c.chunk_index
LIMIT @limit`, args
	case NewestFirst:
		return `SELECT ` + columns + `, 0::bigint AS sort_priority
FROM opsq.chunks c
WHERE c.shard IN (` + in + `)
  AND (c.submission_id, c.chunk_index) < (@after_submission::bigint, @after_chunk::int)` + filter + `
ORDER BY c.submission_id DESC, c.chunk_index DESC
LIMIT @limit`, args
	case CustomPriority:
		return `SELECT ` + columns + `, -s.priority AS sort_priority
FROM opsq.submissions s
CROSS JOIN LATERAL (
    SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order
    FROM opsq.chunks c
    WHERE c.submission_id = s.id
      AND c.shard IN (` + in + `)
      AND c.chunk_index > CASE WHEN s.id = @after_submission::bigint THEN @after_chunk::int ELSE -1 END
    ORDER BY c.chunk_index
    LIMIT @limit
) c
WHERE (-s.priority, s.id) >= (@after_priority::bigint, @after_submission::bigint)` + filterSQL(filters, "s.id", args) + `
ORDER BY -s.priority, s.id
LIMIT @limit`, args
	default: // Random
		return `SELECT ` + columns + `, 0::bigint AS sort_priority
FROM opsq.chunks c
WHERE c.shard IN (` + in + `)
  AND (c.random_order, c.submission_id, c.chunk_index) > (@after_order::int, @after_submission::bigint, @after_chunk::int)
  AND c.random_order < @before_order::int` + filter + `
ORDER BY c.random_order, c.submission_id, c.chunk_index
LIMIT @limit`, args
	}
}

// SubmissionQuery returns the SQL that reads one batch of one submission's candidates over
// the instance's shards, in chunk order (a Merge Append of per-shard primary-key range
// scans), restricted by filters. It binds @only_submission, @after_chunk and @limit like
// CandidateQuery, and returns the same columns. select_only scans the few submissions that
// have its value this way.
func SubmissionQuery(filters []Filter, shards []int32) (string, map[string]any) {
	args := map[string]any{}
	filter := filterSQL(filters, "c.submission_id", args)
	in := shardList(shards, args)
	return `SELECT c.submission_id, c.chunk_index, c.shard, c.retries, c.attempt_base, c.input, c.random_order, 0::bigint AS sort_priority
FROM opsq.chunks c
WHERE c.shard IN (` + in + `)
  AND c.submission_id = @only_submission::bigint
  AND c.chunk_index > @after_chunk::int` + filter + `
ORDER BY c.chunk_index
LIMIT @limit`, args
}

// shardList binds the shards one argument each, shard_0, shard_1, …: PostgreSQL prunes the
// chunk partitions of a cached generic plan at run time for an IN list of arguments, not
// for one array argument (= ANY(@shards) scans and filters every partition).
func shardList(shards []int32, args map[string]any) string {
	names := make([]string, len(shards))
	for i, s := range shards {
		name := fmt.Sprintf("shard_%d", i)
		args[name] = s
		names[i] = "@" + name + "::int"
	}
	return strings.Join(names, ", ")
}

// filterSQL writes one semi-join probe per filter, on the submission id column idColumn,
// and binds the filter's key and value in args.
func filterSQL(filters []Filter, idColumn string, args map[string]any) string {
	var b strings.Builder
	for i, f := range filters {
		k, v := fmt.Sprintf("filter_key_%d", i), fmt.Sprintf("filter_value_%d", i)
		args[k] = f.Key
		cmp := "= @" + v + "::jsonb"
		if f.Values != nil {
			values := make([]string, len(f.Values))
			for j, fv := range f.Values {
				values[j] = string(fv)
			}
			args[v], cmp = values, "= ANY(@"+v+"::text[]::jsonb[])"
		} else {
			args[v] = string(f.Value)
		}
		// OFFSET 0 keeps the planner from turning the probe into a join, which for a
		// selective value would gather the matching chunks and sort them.
		fmt.Fprintf(&b, "\n  AND EXISTS (SELECT 1 FROM opsq.strategic_metadata m%d WHERE m%d.key = @%s AND m%d.value %s AND m%d.submission_id = %s OFFSET 0)",
			i, i, k, i, cmp, i, idColumn)
	}
	return b.String()
}
