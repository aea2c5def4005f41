package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/claims"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
	"opsq/strategy"
)

// A reserve that took chunks for a client that left gives them back at once (clientgone.go):
// reservable again without an attempt counted, not held until their lease runs out.

// TestConnClosed: the peek tells a connection the other end closed from one that is open,
// idle or with bytes waiting, without reading them.
func TestConnClosed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pair := func() (client, server net.Conn) {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { client.Close(); server.Close() })
		return client, server
	}

	client, server := pair()
	if connClosed(server) {
		t.Fatal("an open, idle connection reads as closed")
	}
	if _, err := client.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the bytes on their way: either way it is open
	if connClosed(server) {
		t.Fatal("a connection with bytes waiting reads as closed")
	}
	buf := make([]byte, 3)
	if _, err := server.Read(buf); err != nil || string(buf) != "GET" {
		t.Fatalf("the peek consumed the bytes waiting: read %q, %v", buf, err)
	}

	client, server = pair()
	client.Close()
	waitFor(t, "the closed connection reads as closed", func() bool { return connClosed(server) })
}

// reserveOnConn sends a reserve on a connection of its own, never read: the test closes it.
func reserveOnConn(t *testing.T, url, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", url[len("http://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/reserve HTTP/1.1\r\nHost: opsq\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	return conn
}

// leaveBeforeAnswer returns a Config.beforeAnswer that, once, tells taken that a reserve
// took chunks and waits until its client is seen gone (the test closes it on taken).
func leaveBeforeAnswer(taken chan<- struct{}) func(*http.Request, net.Conn) {
	var once sync.Once
	return func(r *http.Request, conn net.Conn) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return // the test's second reserve
		}
		close(taken)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if (r != nil && clientLeft(r)) || (conn != nil && connClosed(conn)) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// expectGivenBack reserves again and expects the one chunk of the submission, as it was
// before it was taken: no attempt counted.
func expectGivenBack(t *testing.T, e *env) {
	t.Helper()
	r := postJSON(t, e, "/v1/reserve", `{"max": 5, "wait": "20s", "consumer": "second"}`)
	var got wire.Reserved
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("reserve after the client left: %d %s", r.Status, r.Body)
	}
	if len(got.Chunks) != 1 || got.Chunks[0].Retries != 0 || got.Chunks[0].Input == nil || *got.Chunks[0].Input != "only" {
		t.Fatalf("reserve after the first consumer left with the chunk unread: %s; want the chunk at once, 0 retries", r.Body)
	}
}

// TestReserveClientLeftGivesBack: a reserve that took a chunk while its client left (the
// request's connection closed) does not answer into the void: the chunk is reservable
// again at once, with no attempt counted.
func TestReserveClientLeftGivesBack(t *testing.T) {
	t.Parallel()
	taken := make(chan struct{})
	e := setup(t, Config{beforeAnswer: leaveBeforeAnswer(taken)})
	mustSubmit(t, e, `{"chunks": ["only"]}`, 1)
	conn := reserveOnConn(t, e.URL, `{"max": 1, "consumer": "leaves"}`)
	<-taken
	conn.Close()
	expectGivenBack(t, e)
}

// TestParkedReserveClientLeftGivesBack: the same for a parked reserve woken by work: the
// client left between the wake-up and the answer, while nobody read its connection.
func TestParkedReserveClientLeftGivesBack(t *testing.T) {
	t.Parallel()
	taken := make(chan struct{})
	e := setup(t, Config{beforeAnswer: leaveBeforeAnswer(taken)})
	conn := reserveOnConn(t, e.URL, `{"max": 1, "wait": "30s", "consumer": "leaves"}`)
	waitFor(t, "the reserve parks", func() bool { return e.H.Parked() == 1 })
	mustSubmit(t, e, `{"chunks": ["only"]}`, 1)
	<-taken
	conn.Close()
	waitFor(t, "the parked reserve ends", func() bool { return e.H.Parked() == 0 })
	expectGivenBack(t, e)
}

// TestGiveBackForwardedChunks: chunks a reserve brought from another instance (forwarding)
// are given back by that instance, asked over the instances' signed route: the instance
// that took them for a client that left holds none of their shards.
func TestGiveBackForwardedChunks(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	type inst struct {
		q   *queuer.Queuer
		url string
	}
	start := func(id string) inst {
		srv := httptest.NewUnstartedServer(nil)
		srv.Config.ConnContext = ConnContext
		url := "http://" + srv.Listener.Addr().String()
		q := queuertest.Start(t, queuer.Config{Pool: pool, Instance: claims.Instance{ID: id, AdvertiseURL: url}})
		h := New(Config{Queuer: q})
		srv.Config.Handler = h
		srv.Start()
		t.Cleanup(srv.Close)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			defer cancel()
			_ = h.Shutdown(ctx)
		})
		return inst{q: q, url: url}
	}
	a, b := start(fmt.Sprintf("giveback-a-%d", time.Now().UnixNano())), start(fmt.Sprintf("giveback-b-%d", time.Now().UnixNano()))
	e := &env{URL: a.url, Q: a.q, Pool: pool}
	mustSubmit(t, e, `{"chunks": ["0","1","2","3","4","5","6","7","8","9","10","11","12","13","14","15"]}`, 16)

	ctx := t.Context()
	local := queuer.ReserveRequest{Max: 16, Lease: time.Hour, Strategy: strategy.Default, Forwarded: true} // b's own shards only
	var held []queuer.Chunk
	waitFor(t, "b holds shards with chunks", func() bool {
		var err error
		held, err = b.q.Reserve(ctx, local)
		if err != nil {
			t.Fatal(err)
		}
		return len(held) > 0
	})
	a.q.GiveBack(ctx, held) // a holds none of their shards: it asks b

	again := map[int32]int32{}
	waitFor(t, fmt.Sprintf("b hands out the %d chunks given back", len(held)), func() bool {
		got, err := b.q.Reserve(ctx, local)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range got {
			again[ch.ChunkIndex] = ch.Retries
		}
		return len(again) >= len(held)
	})
	for _, ch := range held {
		if r, ok := again[ch.ChunkIndex]; !ok || r != 0 {
			t.Errorf("chunk %d after the give-back: handed out %v, retries %d; want handed out again with 0", ch.ChunkIndex, ok, r)
		}
	}

	// With a key, or unsigned, the route refuses: only instances call it.
	r := httpCall(t, http.MethodPost, b.url+"/v1/reserve/giveback", "application/json", strings.NewReader(`{"tokens": []}`))
	if r.Status != http.StatusForbidden {
		t.Errorf("an unsigned give-back: %d %s; want 403", r.Status, r.Body)
	}
}

// TestGiveBackStaleTokenChangesNothing: a give-back that comes late, with the token of a
// reservation already given back and the chunk since reserved again, leaves the new
// holder's reservation alone.
func TestGiveBackStaleTokenChangesNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{})
	mustSubmit(t, e, `{"chunks": ["only"]}`, 1)
	ctx := t.Context()
	req := queuer.ReserveRequest{Max: 1, Lease: time.Hour, Strategy: strategy.Default, Forwarded: true}
	first, err := e.Q.Reserve(ctx, req)
	if err != nil || len(first) != 1 {
		t.Fatalf("first reserve: %v, %v", first, err)
	}
	e.Q.GiveBackTokens([]string{first[0].Token})
	var second []queuer.Chunk
	waitFor(t, "the chunk given back to be handed out again", func() bool {
		second, err = e.Q.Reserve(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return len(second) == 1
	})
	if second[0].Token == first[0].Token {
		t.Fatal("the second reservation has the first's token")
	}
	e.Q.GiveBackTokens([]string{first[0].Token}) // late, stale
	if third, err := e.Q.Reserve(ctx, req); err != nil || len(third) != 0 {
		t.Fatalf("a reserve after a stale give-back: %v, %v; want nothing (the chunk is the second holder's)", third, err)
	}
	res, err := e.Q.Complete(ctx, []queuer.Completion{{Token: second[0].Token}})
	if err != nil || res[0] != wire.StatusCompleted {
		t.Fatalf("the second holder completing: %v, %v; want completed", res, err)
	}
}
