package reserver

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// model is the simplest possible reserver: a map of live reservations, each
// with the order it was made in. The randomized test drives the Reserver with
// the operations the queuer calls (Reserve, Release, ReleaseKey, Extend,
// DropShard, DropSubmission, TakeExpired) and compares it with the model after
// every one.
type model struct {
	live map[string]modelEntry // by token
	seq  int
}

type modelEntry struct {
	res     Reservation
	seq     int
	expired bool // returned by TakeExpired: held until released, not extendable
}

func (m *model) reserve(res Reservation) bool {
	if _, ok := m.live[res.Token]; ok {
		return false
	}
	for _, e := range m.live {
		if e.res.Key == res.Key {
			return false
		}
	}
	m.seq++
	m.live[res.Token] = modelEntry{res: res, seq: m.seq}
	return true
}

// sorted returns the live entries that match keep, ordered by expiry, then by
// reservation order.
func (m *model) sorted(keep func(Reservation) bool) []Reservation {
	var es []modelEntry
	for _, e := range m.live {
		if keep(e.res) {
			es = append(es, e)
		}
	}
	slices.SortFunc(es, func(a, b modelEntry) int {
		return cmp.Or(a.res.ExpiresAt.Compare(b.res.ExpiresAt), cmp.Compare(a.seq, b.seq))
	})
	out := make([]Reservation, len(es))
	for i, e := range es {
		out[i] = e.res
	}
	return out
}

// removeAll removes rs and returns them.
func (m *model) removeAll(rs []Reservation) []Reservation {
	for _, res := range rs {
		delete(m.live, res.Token)
	}
	return rs
}

// inReservationOrder sorts rs by the order they were made in.
func (m *model) inReservationOrder(rs []Reservation) []Reservation {
	slices.SortFunc(rs, func(a, b Reservation) int { return cmp.Compare(m.live[a.Token].seq, m.live[b.Token].seq) })
	return rs
}

func TestRandomOperations(t *testing.T) {
	t.Parallel()
	seeds := []uint64{1, 2, 3, uint64(time.Now().UnixNano())}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			runRandomOperations(t, seed, 5_000)
		})
	}
}

func runRandomOperations(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const (
		submissions = 8
		chunksPer   = 8
		shards      = 6
		tokenSpace  = 200 // small enough that tokens collide now and then
	)
	// A few shared Values maps (as the reservations of one submission share
	// one) and some made per reservation.
	shared := []map[string]string{
		nil,
		{"company_id": "1"},
		{"company_id": "2", "mode": `"preview"`},
		{"mode": `"production"`},
	}
	valueKeys := [][2]string{
		{"company_id", "1"}, {"company_id", "2"}, {"company_id", "3"},
		{"mode", `"preview"`}, {"mode", `"production"`}, {"other", "x"},
	}

	r := New(Config{InitialCapacity: rng.IntN(100)})
	m := &model{live: make(map[string]modelEntry)}
	now := 0 // seconds after t0; time only moves forward for TakeExpired

	randomToken := func() string {
		// Mostly a token of a live reservation, so Release and Extend hit.
		if len(m.live) > 0 && rng.IntN(4) != 0 {
			live := slices.Sorted(maps.Keys(m.live)) // sorted, so a seed replays
			return live[rng.IntN(len(live))]
		}
		return fmt.Sprint("tok-", rng.IntN(tokenSpace))
	}
	randomKey := func() Key {
		return Key{SubmissionID: int64(rng.IntN(submissions)), ChunkIndex: int32(rng.IntN(chunksPer))}
	}

	for step := range steps {
		var op string
		switch p := rng.IntN(100); {
		case p < 40:
			key := randomKey()
			res := Reservation{
				Token:      fmt.Sprint("tok-", rng.IntN(tokenSpace)),
				Key:        key,
				Shard:      int(key.SubmissionID*chunksPer+int64(key.ChunkIndex)) % shards,
				Generation: int64(rng.IntN(3)),
				Retries:    int32(rng.IntN(3)),
				Consumer:   "c",
				ExpiresAt:  at(now + rng.IntN(50)),
			}
			if rng.IntN(3) == 0 {
				res.Values = map[string]string{"company_id": fmt.Sprint(1 + rng.IntN(3))}
			} else {
				res.Values = shared[key.SubmissionID%int64(len(shared))]
			}
			op = fmt.Sprintf("Reserve(%q, %v, shard %d)", res.Token, res.Key, res.Shard)
			if got, want := r.Reserve(res), m.reserve(res); got != want {
				t.Fatalf("seed %d step %d: %s = %t; want %t", seed, step, op, got, want)
			}
		case p < 55:
			token := randomToken()
			op = fmt.Sprintf("Release(%q)", token)
			want, wantOK := m.live[token]
			got, ok := r.Release(token)
			if ok != wantOK || !equalReservation(got, want.res) {
				t.Fatalf("seed %d step %d: %s = %+v, %t; want %+v, %t", seed, step, op, got, ok, want.res, wantOK)
			}
			delete(m.live, token)
		case p < 65:
			key := randomKey()
			op = fmt.Sprintf("ReleaseKey(%v)", key)
			want := m.sorted(func(res Reservation) bool { return res.Key == key })
			got, ok := r.ReleaseKey(key)
			if ok != (len(want) == 1) || (ok && !equalReservation(got, want[0])) {
				t.Fatalf("seed %d step %d: %s = %+v, %t; want %v", seed, step, op, got, ok, want)
			}
			m.removeAll(want)
		case p < 80:
			token := randomToken()
			to := at(now + rng.IntN(60) - 10) // earlier or later
			op = fmt.Sprintf("Extend(%q, %v)", token, to)
			e, wantOK := m.live[token]
			wantOK = wantOK && !e.expired // a lease that ran out cannot be extended
			got, ok := r.Extend(token, to)
			if ok != wantOK {
				t.Fatalf("seed %d step %d: %s ok = %t; want %t", seed, step, op, ok, wantOK)
			}
			if ok {
				e.res.ExpiresAt = to
				m.live[token] = e
				if !equalReservation(got, e.res) {
					t.Fatalf("seed %d step %d: %s = %+v; want %+v", seed, step, op, got, e.res)
				}
			}
		case p < 85:
			shard := rng.IntN(shards + 1)
			op = fmt.Sprintf("DropShard(%d)", shard)
			want := m.inReservationOrder(m.sorted(func(res Reservation) bool { return res.Shard == shard }))
			got := r.DropShard(shard)
			if !slices.EqualFunc(got, want, equalReservation) {
				t.Fatalf("seed %d step %d: %s = %q; want %q", seed, step, op, tokens(got), tokens(want))
			}
			m.removeAll(want)
		case p < 90:
			sub := int64(rng.IntN(submissions + 1))
			op = fmt.Sprintf("DropSubmission(%d)", sub)
			want := m.sorted(func(res Reservation) bool { return res.Key.SubmissionID == sub })
			got := r.DropSubmission(sub)
			byToken := func(a, b Reservation) int { return cmp.Compare(a.Token, b.Token) }
			slices.SortFunc(want, byToken) // DropSubmission's order is not defined
			slices.SortFunc(got, byToken)
			if !slices.EqualFunc(got, want, equalReservation) {
				t.Fatalf("seed %d step %d: %s = %q; want %q", seed, step, op, tokens(got), tokens(want))
			}
			m.removeAll(want)
		default:
			now += rng.IntN(10)
			retry := now + 1 + rng.IntN(20)
			op = fmt.Sprintf("TakeExpired(t0+%ds, t0+%ds)", now, retry)
			due := at(now)
			want := m.sorted(func(res Reservation) bool { return !res.ExpiresAt.After(due) })
			got := r.TakeExpired(due, at(retry))
			if !slices.EqualFunc(got, want, equalReservation) {
				t.Fatalf("seed %d step %d: %s = %q; want %q", seed, step, op, tokens(got), tokens(want))
			}
			for _, res := range want { // still held, due again at retry
				e := m.live[res.Token]
				e.res.ExpiresAt, e.expired = at(retry), true
				m.live[res.Token] = e
			}
		}

		// Compare every observable with the model.
		checkInvariants(t, r)
		if got, want := r.Len(), len(m.live); got != want {
			t.Fatalf("seed %d step %d after %s: Len() = %d; want %d", seed, step, op, got, want)
		}
		wantShards := make(map[int]int)
		wantValues := make(map[[2]string]int)
		var wantNext time.Time
		for _, e := range m.live {
			wantShards[e.res.Shard]++
			for k, v := range e.res.Values {
				wantValues[[2]string{k, v}]++
			}
			if wantNext.IsZero() || e.res.ExpiresAt.Before(wantNext) {
				wantNext = e.res.ExpiresAt
			}
		}
		if got := inflightShards(r); !maps.Equal(got, wantShards) {
			t.Fatalf("seed %d step %d after %s: in-flight shards = %v; want %v", seed, step, op, got, wantShards)
		}
		for shard := range shards + 1 {
			if got := r.InflightShard(shard); got != wantShards[shard] {
				t.Fatalf("seed %d step %d after %s: InflightShard(%d) = %d; want %d", seed, step, op, shard, got, wantShards[shard])
			}
		}
		for _, kv := range valueKeys {
			if got := r.InflightValue(kv[0], kv[1]); got != wantValues[kv] {
				t.Fatalf("seed %d step %d after %s: InflightValue(%q, %q) = %d; want %d", seed, step, op, kv[0], kv[1], got, wantValues[kv])
			}
		}
		next, ok := earliestExpiry(r)
		if ok != (len(m.live) > 0) || !next.Equal(wantNext) {
			t.Fatalf("seed %d step %d after %s: earliest expiry %v, %t; want %v", seed, step, op, next, ok, wantNext)
		}
		liveKeys := make(map[Key]bool, len(m.live))
		for _, e := range m.live {
			liveKeys[e.res.Key] = true
		}
		for s := range submissions {
			for c := range chunksPer {
				key := Key{SubmissionID: int64(s), ChunkIndex: int32(c)}
				want := liveKeys[key]
				if got := r.IsReserved(key); got != want {
					t.Fatalf("seed %d step %d after %s: IsReserved(%v) = %t; want %t", seed, step, op, key, got, want)
				}
			}
		}
		for token, e := range m.live {
			if got, ok := r.Get(token); !ok || !equalReservation(got, e.res) {
				t.Fatalf("seed %d step %d after %s: Get(%q) = %+v, %t; want %+v", seed, step, op, token, got, ok, e.res)
			}
		}
	}
}
