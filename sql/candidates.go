package sql

import (
	_ "embed"
	"fmt"
	"strings"
)

// The candidate queries' text: one skeleton per ordering of a strategy's leaf, and the
// fragment of a strategic metadata filter, which package strategy composes into the query
// of a leaf (strategy.CandidateQuery, strategy.SubmissionQuery) and the reserve path runs
// through CandidatesStream. The skeletons mark where the compiler puts the shards'
// arguments (/*shards*/) and the filters (/*filters*/); values are always bound arguments.

// CandidateOrder is the order in which a candidate query reads a leaf's chunks.
type CandidateOrder int

// The orders of candidate queries.
const (
	CandidatesRandom CandidateOrder = iota
	CandidatesOldestFirst
	CandidatesNewestFirst
	CandidatesCustomPriority
	// CandidatesSubmission reads one submission's chunks in chunk order.
	CandidatesSubmission
)

//go:embed candidates_random.sql
var candidatesRandom string

//go:embed candidates_oldest_first.sql
var candidatesOldestFirst string

//go:embed candidates_newest_first.sql
var candidatesNewestFirst string

//go:embed candidates_custom_priority.sql
var candidatesCustomPriority string

//go:embed candidates_submission.sql
var candidatesSubmission string

//go:embed candidates_custom_priority_citus.sql
var candidatesCustomPriorityCitus string

// customPriorityCitus are candidates_custom_priority_citus.sql's two steps, without their
// comments: the submissions' skeleton and the read of one submission's chunks.
var customPriorityCitus = func() [2]string {
	steps := statementsOf(candidatesCustomPriorityCitus)
	return [2]string{statementText(steps[0]), statementText(steps[1])}
}()

//go:embed candidates_filter.sql
var candidatesFilter string

//go:embed candidates_shards.sql
var candidatesShards string

// candidateSkeletons are the skeletons by order, without their comments.
var candidateSkeletons = [...]string{
	CandidatesRandom:         statementText(candidatesRandom),
	CandidatesOldestFirst:    statementText(candidatesOldestFirst),
	CandidatesNewestFirst:    statementText(candidatesNewestFirst),
	CandidatesCustomPriority: statementText(candidatesCustomPriority),
	CandidatesSubmission:     statementText(candidatesSubmission),
}

// candidateMerge is the frame of candidates_shards.sql, without its comments.
var candidateMerge = statementText(candidatesShards)

// candidateFilter is the filter fragment, without its comments, on a line of its own.
var candidateFilter = "\n" + statementText(candidatesFilter)

// statementText is a statement file's text without its comment lines and its last newline.
func statementText(file string) string {
	var b strings.Builder
	for line := range strings.Lines(file) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// CandidateFilter is one strategic metadata filter of a candidate query: the submissions
// whose key ValueArg names one of its values (ValueArg is bound to one JSON text, or with
// Many to an array of them).
type CandidateFilter struct {
	KeyArg, ValueArg string // the names of the arguments bound to the key and the value(s)
	Many             bool
}

// CandidateQuery is the text of a candidate query of order: shards are the names of the
// arguments bound to the instance's shards, one each, and each filter a probe of the
// strategic metadata on the submission id.
//
// On one PostgreSQL (opsq.chunks one table, migration 00026), the query of several shards
// is the skeleton once per shard, merged (candidates_shards.sql): one ordered scan per
// shard of the index that leads with it. custom_priority keeps the IN list there: each
// submission's chunks are read by the primary key (submission_id, chunk_index, shard) in
// chunk order, the other shards' filtered out. On Citus, where chunks is distributed by
// shard, the skeleton as it is, with the shards' arguments in its IN list; custom_priority
// there is the first step of candidates_custom_priority_citus.sql, which CandidatesStream
// recognizes and completes. The text
// depends only on the order, the number of shards and the filters, so that a connection
// keeps one generic plan of each (session.go).
func CandidateQuery(order CandidateOrder, shards []string, filters []CandidateFilter) string {
	id := "c.submission_id"
	if order == CandidatesCustomPriority {
		id = "s.id"
	}
	var fs strings.Builder
	for i, f := range filters {
		value := "= @" + f.ValueArg + "::jsonb"
		if f.Many {
			value = "= ANY(@" + f.ValueArg + "::text[]::jsonb[])"
		}
		fs.WriteString(strings.NewReplacer("/*n*/", fmt.Sprint(i), "/*key*/", "@"+f.KeyArg, "/*value*/", value, "/*id*/", id).
			Replace(candidateFilter))
	}
	skeleton := candidateSkeletons[order]
	if order == CandidatesCustomPriority && OnCitus() {
		skeleton = customPriorityCitus[0] // its steps run by CandidatesStream
	}
	skeleton = strings.Replace(skeleton, "/*filters*/", fs.String(), 1)
	if OnCitus() || order == CandidatesCustomPriority || len(shards) <= 1 {
		var in strings.Builder
		for i, s := range shards {
			if i > 0 {
				in.WriteString(", ")
			}
			in.WriteString("@" + s + "::int")
		}
		return strings.Replace(skeleton, "/*shards*/", in.String(), 1)
	}
	var branches strings.Builder
	for i, s := range shards {
		if i > 0 {
			branches.WriteString("\nUNION ALL\n")
		}
		branches.WriteString("(" + strings.Replace(skeleton, "IN (/*shards*/)", "= @"+s+"::int", 1) + ")")
	}
	tail := skeleton[strings.LastIndex(skeleton, "\nORDER BY ")+1:]
	return strings.NewReplacer("/*branches*/", branches.String(), "/*order*/", tail).Replace(candidateMerge)
}
