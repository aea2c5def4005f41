package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"opsq/api/apikeys"
	"opsq/queuer"
	"opsq/queuer/queuertest"
	"opsq/sql/pgtest"
)

// TestWaitersPerKey: with OPSQ_MAX_WAITERS 4, one consumer key holds at most 2 (half) of
// the waiting requests, reserves and status waits together: its third gets 503
// too_many_waiters while another key's requests still wait; once one of its own ends, it
// may wait again.
func TestWaitersPerKey(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	log := pgtest.Logger(t, 0)
	set := apikeys.NewSet(pool, log)
	if err := set.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Stop)
	q := queuertest.Start(t, queuer.Config{Pool: pool, MaxWaiters: 4, Notified: map[string]func(string){apikeys.Channel: set.Notified}})
	h := New(Config{Queuer: q, Keys: set, Logger: log})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	key := map[string]string{}
	for _, name := range []string{"greedy", "other"} {
		_, k, err := apikeys.Create(t.Context(), pool, name, apikeys.Consumer, 0)
		if err != nil {
			t.Fatal(err)
		}
		key[name] = k
	}
	pgtest.Eventually(t, 30*time.Second, "the instance knowing the new keys", func() bool {
		_, e1 := set.Check(key["greedy"])
		_, e2 := set.Check(key["other"])
		return e1 == nil && e2 == nil
	})

	// Each waiting reserve runs until the test ends (its context) or its wait does.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type answer struct {
		status int
		body   string
	}
	reserve := func(who, wait string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/reserve", strings.NewReader(fmt.Sprintf(`{"wait": %q}`, wait)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key[who])
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- answer{0, err.Error()}
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			out <- answer{resp.StatusCode, string(body)}
		}()
		return out
	}
	waitWaiting := func(n int64) {
		t.Helper()
		pgtest.WaitFor(t, time.Minute, fmt.Sprintf("%d requests waiting", n), func() string {
			if got := q.Metrics().Waiting; got != n {
				return fmt.Sprintf("%d waiting", got)
			}
			return ""
		})
	}
	short := reserve("greedy", "3s")
	reserve("greedy", "60s")
	waitWaiting(2)
	select {
	case a := <-reserve("greedy", "60s"):
		if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "OPSQ_MAX_WAITERS_PER_KEY") {
			t.Fatalf("greedy's third waiting reserve: %d %s; want 503", a.status, a.body)
		}
	case <-time.After(time.Minute):
		t.Fatal("greedy's third waiting reserve was not refused within a minute")
	}
	reserve("other", "60s")
	waitWaiting(3)
	// The short wait ends: greedy may wait again.
	select {
	case a := <-short:
		if a.status != http.StatusOK {
			t.Fatalf("greedy's short wait: %d %s; want 200 without chunks", a.status, a.body)
		}
	case <-time.After(time.Minute):
		t.Fatal("greedy's 3s wait did not end within a minute")
	}
	waitWaiting(2)
	reserve("greedy", "60s")
	waitWaiting(3)
}
