package notify

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"opsq/reserver"
	opsqsql "opsq/sql"
)

// The channels and the grammar of their payloads, written once: what each sender writes
// (Send…) and what the listener reads back (parse), side by side.
//
//	opsq_work          "all:N"  N chunks became reservable over every shard
//	                   "all"    anything may have changed
//	                   "3,17"   a chunk on each shard named (a shard named twice: two chunks)
//	opsq_finished      "<submission id>"  the submission reached a final state
//	opsq_released      comma-separated items:
//	                   "<submission id>:<chunk index>"  the chunk was completed or failed
//	                   "*<submission id>"               the submission failed or was cancelled
//	                   "<token>"                        the attempt of the token was retried
//	opsq_cluster_keys  ""  the cluster keys were rotated (sql/admin/rotate_cluster_key.sql)
//	opsq_progress      "<submission id>,…"  chunks of each submission were finished (results follow)
//	opsq_paused        "<submission id>"    the submission was paused: its chunks wait
//	opsq_parents       "<submission id>,…"  each has a child waiting on it (or to re-arm)
//	opsq_throttles     ""                        a throttle was set: read the throttles in force again
//	                   "set:<nonce>"             the same, then answer with the ack below
//	                   "ack:<nonce>:<instance>"  the instance has the throttle of nonce in force

// The channels.
const (
	ChannelWork        = "opsq_work"
	ChannelFinished    = "opsq_finished"
	ChannelReleased    = "opsq_released"
	ChannelClusterKeys = "opsq_cluster_keys"
	ChannelProgress    = "opsq_progress"
	ChannelPaused      = "opsq_paused"
	ChannelThrottles   = "opsq_throttles"
	ChannelParents     = "opsq_parents"
)

// payloadMax keeps a payload under PostgreSQL's 8000-byte limit: a list longer than that
// goes out in several NOTIFYs.
const payloadMax = 7000

// SendWorkAll announces n new chunks spread over every shard, at the commit of db's
// transaction (n < 0: any number).
func SendWorkAll(ctx context.Context, q opsqsql.Queries, n int64) error {
	payload := "all"
	if n >= 0 {
		payload += ":" + strconv.FormatInt(n, 10)
	}
	return send(ctx, q, ChannelWork, payload)
}

// SendWork announces a reservable chunk on each shard named (a shard named twice: two
// chunks), in as many NOTIFYs as the list takes.
func SendWork(ctx context.Context, q opsqsql.Queries, shards []int) error {
	items := make([]string, len(shards))
	for i, s := range shards {
		items[i] = strconv.Itoa(s)
	}
	return sendList(ctx, q, ChannelWork, items)
}

// SendFinished tells every instance that submission id reached a final state.
func SendFinished(ctx context.Context, q opsqsql.Queries, id int64) error {
	return send(ctx, q, ChannelFinished, strconv.FormatInt(id, 10))
}

// SendFinishedChunks tells every instance that these chunks were completed or failed, so
// that the one holding their reservations drops them.
func SendFinishedChunks(ctx context.Context, q opsqsql.Queries, keys []reserver.Key) error {
	items := make([]string, len(keys))
	for i, k := range keys {
		items[i] = fmt.Sprintf("%d:%d", k.SubmissionID, k.ChunkIndex)
	}
	return sendList(ctx, q, ChannelReleased, items)
}

// RetriedNotices are the NOTIFYs of a retried attempt at a chunk of shard, for a statement
// that sends them itself (chunk_retry.sql): to the instance holding the reservation token,
// unless held here (heldHere), so that it drops it; and that the chunk is reservable again.
func RetriedNotices(shard int, token string, heldHere bool) (released, work opsqsql.Notice) {
	if token != "" && !heldHere {
		released = opsqsql.Notice{Channel: ChannelReleased, Payload: token}
	}
	return released, opsqsql.Notice{Channel: ChannelWork, Payload: strconv.Itoa(shard)}
}

// SendRetried tells the instance holding the reservation token that its attempt was
// retried elsewhere: it drops the reservation.
func SendRetried(ctx context.Context, q opsqsql.Queries, token string) error {
	return send(ctx, q, ChannelReleased, token)
}

// SendDropped tells every instance that submissions ids finished with chunks it may hold
// reservations of (they failed or were cancelled), and whoever waits for them: "*id" on
// ChannelReleased and "id" on ChannelFinished for each, in one statement
// (sql/submissions_notify_dropped.sql) for any number of submissions.
func SendDropped(ctx context.Context, q opsqsql.Queries, ids ...int64) error {
	return q.SubmissionsNotifyDropped(ctx, opsqsql.SubmissionsNotifyDroppedParams{
		IDs: ids, Released: ChannelReleased, Finished: ChannelFinished,
	})
}

// SendProgress tells every instance that chunks of submissions ids were finished
// (completed, failed for good, or skipped), at the commit of q's transaction, so that
// those following the submissions' results read on. Ids repeated within a transaction
// cost nothing: PostgreSQL folds identical notifications of one transaction.
func SendProgress(ctx context.Context, q opsqsql.Queries, ids ...int64) error {
	for _, n := range Progress(ids...) {
		if err := q.Notify(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// Progress is SendProgress's notifications, for a statement to send them with others in
// one round trip (the completer's, sql.ChunksCompleteParams.Notify).
func Progress(ids ...int64) []opsqsql.NotifyParams {
	items := make([]string, len(ids))
	for i, id := range ids {
		items[i] = strconv.FormatInt(id, 10)
	}
	return listPayloads(ChannelProgress, items)
}

// SendPaused tells every instance that submission id was paused, so that each drops the
// candidates of it that it buffered.
func SendPaused(ctx context.Context, q opsqsql.Queries, id int64) error {
	return send(ctx, q, ChannelPaused, strconv.FormatInt(id, 10))
}

// SendParents tells every instance that submissions ids have a child waiting on them (or
// to re-arm), at the commit of q's transaction, so that each acts on their children when
// they finish.
func SendParents(ctx context.Context, q opsqsql.Queries, ids ...int64) error {
	items := make([]string, len(ids))
	for i, id := range ids {
		items[i] = strconv.FormatInt(id, 10)
	}
	return sendList(ctx, q, ChannelParents, items)
}

// SendThrottles tells every instance that a throttle was set, at the commit of db's
// transaction; each answers with SendThrottleAck(nonce) once it has it in force.
func SendThrottles(ctx context.Context, q opsqsql.Queries, nonce string) error {
	return send(ctx, q, ChannelThrottles, "set:"+nonce)
}

// SendThrottleAck tells the setter of the throttle of nonce that instance has it in force.
func SendThrottleAck(ctx context.Context, q opsqsql.Queries, nonce, instance string) error {
	return send(ctx, q, ChannelThrottles, "ack:"+nonce+":"+instance)
}

func send(ctx context.Context, q opsqsql.Queries, channel, payload string) error {
	return q.Notify(ctx, opsqsql.NotifyParams{Channel: channel, Payload: payload})
}

// sendList sends items comma-separated, in payloads under payloadMax.
func sendList(ctx context.Context, q opsqsql.Queries, channel string, items []string) error {
	for _, n := range listPayloads(channel, items) {
		if err := q.Notify(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// listPayloads are the notifications on channel of items comma-separated, in payloads
// under payloadMax.
func listPayloads(channel string, items []string) []opsqsql.NotifyParams {
	var out []opsqsql.NotifyParams
	var b strings.Builder
	for _, it := range items {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(it)
		if b.Len() > payloadMax {
			out = append(out, opsqsql.NotifyParams{Channel: channel, Payload: b.String()})
			b.Reset()
		}
	}
	if b.Len() > 0 {
		out = append(out, opsqsql.NotifyParams{Channel: channel, Payload: b.String()})
	}
	return out
}

// parse reads one notification as the events it announces; nil for one it does not know.
func parse(channel, payload string, readToken TokenReader) []Event {
	switch channel {
	case "": // the listener reconnected
		return []Event{Resync{}}
	case ChannelWork:
		return []Event{parseWork(payload)}
	case ChannelFinished:
		if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
			return []Event{SubmissionFinished{ID: id}}
		}
	case ChannelReleased:
		return parseReleased(payload, readToken)
	case ChannelClusterKeys:
		return []Event{ClusterKeysChanged{}}
	case ChannelThrottles:
		if rest, ok := strings.CutPrefix(payload, "ack:"); ok {
			if nonce, instance, ok := strings.Cut(rest, ":"); ok {
				return []Event{ThrottleAck{Nonce: nonce, Instance: instance}}
			}
			return nil
		}
		return []Event{ThrottlesChanged{Nonce: strings.TrimPrefix(payload, "set:")}}
	case ChannelProgress:
		if ids := parseIDs(payload); len(ids) > 0 {
			return []Event{SubmissionProgress{IDs: ids}}
		}
	case ChannelParents:
		if ids := parseIDs(payload); len(ids) > 0 {
			return []Event{ParentsWaited{IDs: ids}}
		}
	case ChannelPaused:
		if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
			return []Event{SubmissionPaused{ID: id}}
		}
	}
	return nil
}

// parseIDs reads a comma-separated list of submission ids, leaving out what is not one.
func parseIDs(payload string) []int64 {
	var ids []int64
	for _, f := range strings.Split(payload, ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// parseWork reads ChannelWork's payload.
func parseWork(payload string) NewWork {
	if rest, ok := strings.CutPrefix(payload, "all"); ok {
		n := -1
		if c, err := strconv.Atoi(strings.TrimPrefix(rest, ":")); err == nil && c >= 0 {
			n = c
		}
		return NewWork{Chunks: n}
	}
	w := NewWork{Shards: []int{}}
	for _, f := range strings.Split(payload, ",") {
		if s, err := strconv.Atoi(f); err == nil {
			w.Shards = append(w.Shards, s)
		}
	}
	w.Chunks = len(w.Shards)
	return w
}

// parseReleased reads ChannelReleased's payload: the finished chunks as one event, and
// an event per dropped submission and per retried token.
func parseReleased(payload string, readToken TokenReader) []Event {
	var out []Event
	var finished []reserver.Key
	for _, item := range strings.Split(payload, ",") {
		if sid, ok := strings.CutPrefix(item, "*"); ok {
			if id, err := strconv.ParseInt(sid, 10, 64); err == nil {
				out = append(out, SubmissionDropped{ID: id})
			}
			continue
		}
		sid, idx, isKey := strings.Cut(item, ":")
		if !isKey {
			if readToken == nil {
				continue
			}
			if f, ok := readToken(item); ok {
				out = append(out, ChunksFreed{Chunks: []Freed{f}})
			}
			continue
		}
		s, err1 := strconv.ParseInt(sid, 10, 64)
		i, err2 := strconv.ParseInt(idx, 10, 32)
		if err1 == nil && err2 == nil {
			finished = append(finished, reserver.Key{SubmissionID: s, ChunkIndex: int32(i)})
		}
	}
	if len(finished) > 0 {
		out = append(out, ChunksFinished{Keys: finished})
	}
	return out
}
