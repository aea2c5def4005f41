package notify

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"opsq/queuer/internal/tokens"
	"opsq/reserver"
	opsqsql "opsq/sql"
	"opsq/sql/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// TestParse: each payload of the grammar reads as the events it announces, and what is
// not of it reads as nothing.
func TestParse(t *testing.T) {
	t.Parallel()
	tok := tokens.New(reserver.Key{SubmissionID: 7, ChunkIndex: 3}, 5, 2, 1).Signed(tokens.NewStaticKeyring([]byte(strings.Repeat("s", 32)))).String()
	for _, tc := range []struct {
		channel, payload string
		want             []Event
	}{
		{"", "", []Event{Resync{}}},
		{ChannelWork, "all:5", []Event{NewWork{Chunks: 5}}},
		{ChannelWork, "all", []Event{NewWork{Chunks: -1}}},
		{ChannelWork, "3,1,3", []Event{NewWork{Shards: []int{3, 1, 3}, Chunks: 3}}},
		{ChannelWork, "nonsense", []Event{NewWork{Shards: []int{}, Chunks: 0}}},
		{ChannelFinished, "42", []Event{SubmissionFinished{ID: 42}}},
		{ChannelFinished, "x", nil},
		{ChannelReleased, "*42", []Event{SubmissionDropped{ID: 42}}},
		{ChannelReleased, "7:3,8:0", []Event{ChunksFinished{Keys: []reserver.Key{{SubmissionID: 7, ChunkIndex: 3}, {SubmissionID: 8}}}}},
		{ChannelReleased, tok, []Event{ChunksFreed{Chunks: []Freed{{Key: reserver.Key{SubmissionID: 7, ChunkIndex: 3}, Shard: 5, Retries: 1, Token: tok}}}}},
		{ChannelReleased, "*1,2:9,junk", []Event{SubmissionDropped{ID: 1}, ChunksFinished{Keys: []reserver.Key{{SubmissionID: 2, ChunkIndex: 9}}}}},
		{ChannelClusterKeys, "", []Event{ClusterKeysChanged{}}},
		{ChannelThrottles, "", []Event{ThrottlesChanged{}}},
		{ChannelThrottles, "set:ab12", []Event{ThrottlesChanged{Nonce: "ab12"}}},
		{ChannelThrottles, "ack:ab12:opsq-1:3999", []Event{ThrottleAck{Nonce: "ab12", Instance: "opsq-1:3999"}}},
		{ChannelThrottles, "ack:ab12", nil},
		{ChannelProgress, "42", []Event{SubmissionProgress{IDs: []int64{42}}}},
		{ChannelProgress, "42,7,junk,9", []Event{SubmissionProgress{IDs: []int64{42, 7, 9}}}},
		{ChannelProgress, "junk", nil},
		{ChannelPaused, "42", []Event{SubmissionPaused{ID: 42}}},
		{ChannelPaused, "x", nil},
		{"opsq_other", "1", nil},
	} {
		if got := parse(tc.channel, tc.payload, readToken); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parse(%q, %q) = %#v; want %#v", tc.channel, tc.payload, got, tc.want)
		}
	}
}

// TestSendersReadBack: what each sender writes, the listener raises as the events it
// meant, split into several NOTIFYs where a list is long, and another channel's payload
// goes to its function.
func TestSendersReadBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	var mu sync.Mutex
	var got []Event
	var bus Bus
	bus.Subscribe(HandlerFunc(func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, e)
	}))
	others := make(chan string, 10)
	l := NewListener(pool, pgtest.Logger(t, slog.LevelWarn), &bus, map[string]func(string){"opsq_test_other": func(p string) { others <- p }}, readToken)
	if err := l.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	if p := <-others; p != "" {
		t.Fatalf("the other channel's function heard %q at start; want \"\" (anything before the LISTEN was missed)", p)
	}
	many := make([]int, 3000) // more than one payload's worth
	for i := range many {
		many[i] = i % 64
	}
	keys := []reserver.Key{{SubmissionID: 9, ChunkIndex: 1}}
	progress := make([]int64, 1000) // more than one payload's worth
	for i := range progress {
		progress[i] = 1<<40 + int64(i)
	}
	err := opsqsql.InTx(t.Context(), pool, func(tx opsqsql.Queries) error {
		return errors.Join(
			SendWorkAll(t.Context(), tx, 100),
			SendWork(t.Context(), tx, many),
			SendFinished(t.Context(), tx, 11),
			SendFinishedChunks(t.Context(), tx, keys),
			SendDropped(t.Context(), tx, 12, 13),
			SendProgress(t.Context(), tx, progress...),
			SendPaused(t.Context(), tx, 14),
		)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), "SELECT pg_notify('opsq_test_other', 'hello')"); err != nil {
		t.Fatal(err)
	}
	if p := <-others; p != "hello" {
		t.Fatalf("the other channel's function heard %q; want hello", p)
	}
	pgtest.WaitFor(t, 10*time.Second, "the events of every NOTIFY", func() string {
		mu.Lock()
		defer mu.Unlock()
		shards, finished, dropped, progressed, paused := 0, 0, 0, 0, 0
		for _, e := range got {
			switch e := e.(type) {
			case NewWork:
				shards += len(e.Shards)
			case SubmissionFinished:
				finished++
			case SubmissionDropped:
				dropped++
			case SubmissionProgress:
				progressed += len(e.IDs)
			case SubmissionPaused:
				if e.ID == 14 {
					paused++
				}
			}
		}
		if shards != len(many) || finished != 3 || dropped != 2 || progressed != len(progress) || paused != 1 {
			return fmt.Sprintf("%d shards named, %d finished, %d dropped, %d progressed, %d paused; want %d, 3, 2, %d, 1",
				shards, finished, dropped, progressed, paused, len(many), len(progress))
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got[0], NewWork{Chunks: 100}) {
		t.Errorf("the first event is %#v; want the work over every shard", got[0])
	}
	found := false
	for _, e := range got {
		if reflect.DeepEqual(e, ChunksFinished{Keys: keys}) {
			found = true
		}
	}
	if !found {
		t.Errorf("no ChunksFinished of %v among %d events", keys, len(got))
	}
}

// readToken reads a token as the engine does (queuer's freedByToken).
func readToken(tok string) (Freed, bool) {
	t, err := tokens.Parse(tok)
	return Freed{Key: t.Key, Shard: t.Shard, Retries: t.Retries, Token: tok}, err == nil
}
