package reserver

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the base time of the tests; it has no monotonic reading, so that
// times built from it compare by wall clock only.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// at returns t0 plus s seconds.
func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// mk returns a reservation of chunk (sub, idx) on shard with the given token,
// expiring s seconds after t0, with Values built from key=value pairs.
func mk(token string, sub int64, idx int32, shard, s int, kv ...string) Reservation {
	var values map[string]string
	if len(kv) > 0 {
		values = make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			values[kv[i]] = kv[i+1]
		}
	}
	return Reservation{
		Token:      token,
		Key:        Key{SubmissionID: sub, ChunkIndex: idx},
		Shard:      shard,
		Generation: 7,
		Retries:    1,
		Consumer:   "host-3/pid-77",
		ExpiresAt:  at(s),
		Values:     values,
	}
}

// setup returns a Reserver holding rs, failing the test if any is refused.
func setup(t testing.TB, rs ...Reservation) *Reserver {
	t.Helper()
	r := New(Config{})
	for _, res := range rs {
		if !r.Reserve(res) {
			t.Fatalf("Reserve(%q, %v) = false during setup; want true", res.Token, res.Key)
		}
	}
	checkInvariants(t, r)
	return r
}

// tokens returns the tokens of rs, in order.
func tokens(rs []Reservation) []string {
	out := make([]string, 0, len(rs))
	for _, res := range rs {
		out = append(out, res.Token)
	}
	return out
}

// checkInvariants checks that every index of r agrees with the others and
// that the counts match the live reservations exactly.
func checkInvariants(t testing.TB, r *Reserver) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.mu.byToken)
	if len(r.mu.byKey) != n || len(r.mu.expiry) != n {
		t.Fatalf("index sizes: byToken %d, byKey %d, expiry %d; want equal", n, len(r.mu.byKey), len(r.mu.expiry))
	}
	for token, e := range r.mu.byToken {
		if e.res.Token != token {
			t.Fatalf("byToken[%q] holds token %q", token, e.res.Token)
		}
		if r.mu.byKey[e.res.Key] != e {
			t.Fatalf("byKey[%v] is not the entry of token %q", e.res.Key, token)
		}
		if e.index < 0 || e.index >= n || r.mu.expiry[e.index].e != e {
			t.Fatalf("entry %q has heap index %d, not its place in the heap", token, e.index)
		}
		if it := r.mu.expiry[e.index]; !it.expiresAt.Equal(e.res.ExpiresAt) || it.seq == 0 || it.seq > r.mu.seq {
			t.Fatalf("heap item of %q: expires %v, seq %d; want expires %v, seq in [1, %d]",
				token, it.expiresAt, it.seq, e.res.ExpiresAt, r.mu.seq)
		}
	}
	for i := 1; i < n; i++ {
		if r.mu.expiry.Less(i, (i-1)/2) {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	listed := 0
	for shard, l := range r.mu.byShard {
		if l.n == 0 {
			t.Fatalf("shard %d has an empty list; want it deleted", shard)
		}
		count := 0
		var prev *entry
		for e := l.head; e != nil; e = e.links[shardLinks].next {
			if e.links[shardLinks].prev != prev {
				t.Fatalf("shard %d: broken prev link at %q", shard, e.res.Token)
			}
			if e.res.Shard != shard {
				t.Fatalf("shard %d lists %q of shard %d", shard, e.res.Token, e.res.Shard)
			}
			if r.mu.byToken[e.res.Token] != e {
				t.Fatalf("shard %d lists %q, which is not live", shard, e.res.Token)
			}
			if prev != nil && r.mu.expiry[prev.index].seq >= r.mu.expiry[e.index].seq {
				t.Fatalf("shard %d: list not in reservation order at %q", shard, e.res.Token)
			}
			prev = e
			count++
		}
		if l.tail != prev {
			t.Fatalf("shard %d: tail is not the last entry", shard)
		}
		if count != l.n {
			t.Fatalf("shard %d: list has %d entries; count says %d", shard, count, l.n)
		}
		listed += count
	}
	if listed != n {
		t.Fatalf("shard lists hold %d entries; want %d", listed, n)
	}
	inConsumers := 0
	for name, l := range r.mu.byConsumer {
		count := 0
		var prev *entry
		for e := l.head; e != nil; e = e.links[consumerLinks].next {
			if e.links[consumerLinks].prev != prev || e.res.Consumer != name || r.mu.byToken[e.res.Token] != e {
				t.Fatalf("consumer %q: broken list at %q", name, e.res.Token)
			}
			prev = e
			count++
		}
		if count == 0 || count != l.n || l.tail != prev {
			t.Fatalf("consumer %q: list has %d entries, count %d; want equal and not 0, tail last", name, count, l.n)
		}
		inConsumers += count
	}
	if inConsumers != n {
		t.Fatalf("consumer lists hold %d entries; want %d", inConsumers, n)
	}
	want := make(map[valuePair]int)
	for _, e := range r.mu.byToken {
		for k, v := range e.res.Values {
			want[valuePair{k, v}]++
		}
	}
	if !maps.Equal(r.mu.byValue, want) {
		t.Fatalf("value counts %v; want %v", r.mu.byValue, want)
	}
}

// TestNewAcceptsAnyConfig: a negative InitialCapacity counts as 0.
func TestNewAcceptsAnyConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{name: "zero", cfg: Config{}},
		{name: "capacity", cfg: Config{InitialCapacity: 100_000}},
		{name: "negative", cfg: Config{InitialCapacity: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New(tt.cfg)
			if !r.Reserve(mk("a", 1, 0, 0, 10)) {
				t.Fatalf("Reserve on New(%+v) = false; want true", tt.cfg)
			}
		})
	}
}

func TestReserve(t *testing.T) {
	t.Parallel()
	existing := mk("tok-1", 1, 0, 3, 10, "company_id", "42")
	tests := []struct {
		name string
		res  Reservation
		want bool
	}{
		{name: "new key and token", res: mk("tok-2", 2, 0, 3, 10), want: true},
		{name: "same key, other token", res: mk("tok-2", 1, 0, 3, 10), want: false},
		{name: "same key, same token", res: mk("tok-1", 1, 0, 3, 10), want: false},
		{name: "same key on other shard", res: mk("tok-2", 1, 0, 4, 10), want: false},
		{name: "same token, other key", res: mk("tok-1", 2, 0, 3, 10), want: false},
		{name: "same submission, other chunk", res: mk("tok-2", 1, 1, 3, 10), want: true},
		{name: "same chunk index, other submission", res: mk("tok-2", 2, 0, 3, 10), want: true},
		{name: "empty token", res: mk("", 2, 0, 3, 10), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, existing)
			if got := r.Reserve(tt.res); got != tt.want {
				t.Fatalf("Reserve(%q, %v) = %t; want %t", tt.res.Token, tt.res.Key, got, tt.want)
			}
			checkInvariants(t, r)
			wantLen := 1
			if tt.want {
				wantLen = 2
			}
			if got := r.Len(); got != wantLen {
				t.Fatalf("Len() = %d; want %d", got, wantLen)
			}
			// The existing reservation is untouched either way.
			got, ok := r.Get(existing.Token)
			if !ok || got.Key != existing.Key || !got.ExpiresAt.Equal(existing.ExpiresAt) {
				t.Fatalf("Get(%q) = %+v, %t; want the existing reservation", existing.Token, got, ok)
			}
			if got := r.InflightValue("company_id", "42"); got != 1 {
				t.Fatalf("InflightValue(company_id, 42) = %d; want 1", got)
			}
			if got, ok := r.Get(tt.res.Token); tt.want && (!ok || got.Key != tt.res.Key) {
				t.Fatalf("Get(%q) = %+v, %t; want the new reservation", tt.res.Token, got, ok)
			}
		})
	}
}

func TestReserveAgainAfterRemoval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		remove func(r *Reserver) []Reservation
	}{
		{name: "Release", remove: func(r *Reserver) []Reservation {
			res, _ := r.Release("tok-1")
			return []Reservation{res}
		}},
		{name: "ReleaseKey", remove: func(r *Reserver) []Reservation {
			res, _ := r.ReleaseKey(Key{SubmissionID: 1, ChunkIndex: 0})
			return []Reservation{res}
		}},
		{name: "TakeExpired and Release", remove: func(r *Reserver) []Reservation { return expire(r, at(10)) }},
		{name: "DropShard", remove: func(r *Reserver) []Reservation { return r.DropShard(3) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, mk("tok-1", 1, 0, 3, 10, "company_id", "42"))
			if r.Reserve(mk("tok-2", 1, 0, 3, 20)) {
				t.Fatal("Reserve of a reserved key = true; want false")
			}
			if got := tokens(tt.remove(r)); !slices.Equal(got, []string{"tok-1"}) {
				t.Fatalf("removed %q; want [tok-1]", got)
			}
			checkInvariants(t, r)
			if r.IsReserved(Key{SubmissionID: 1, ChunkIndex: 0}) {
				t.Fatal("IsReserved after removal = true; want false")
			}
			if got := r.InflightValue("company_id", "42"); got != 0 {
				t.Fatalf("InflightValue after removal = %d; want 0", got)
			}
			// Both the key and the token can be used again.
			if !r.Reserve(mk("tok-1", 1, 0, 5, 20, "company_id", "43")) {
				t.Fatal("Reserve of the same key and token after removal = false; want true")
			}
			checkInvariants(t, r)
			if got := inflightShards(r); !maps.Equal(got, map[int]int{5: 1}) {
				t.Fatalf("in-flight shards = %v; want map[5:1]", got)
			}
			if got := r.InflightValue("company_id", "43"); got != 1 {
				t.Fatalf("InflightValue(company_id, 43) = %d; want 1", got)
			}
		})
	}
}

func TestIsReserved(t *testing.T) {
	t.Parallel()
	r := setup(t, mk("a", 1, 0, 0, 10), mk("b", 1, 2, 0, 10), mk("c", 2, 0, 1, 10))
	tests := []struct {
		key  Key
		want bool
	}{
		{Key{1, 0}, true},
		{Key{1, 1}, false},
		{Key{1, 2}, true},
		{Key{2, 0}, true},
		{Key{2, 2}, false},
		{Key{3, 0}, false},
		{Key{0, 0}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.key), func(t *testing.T) {
			t.Parallel()
			if got := r.IsReserved(tt.key); got != tt.want {
				t.Fatalf("IsReserved(%v) = %t; want %t", tt.key, got, tt.want)
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	a := mk("a", 1, 0, 0, 10, "mode", `"preview"`)
	r := setup(t, a, mk("b", 2, 0, 1, 20))
	tests := []struct {
		name   string
		token  string
		want   Reservation
		wantOK bool
	}{
		{name: "live", token: "a", want: a, wantOK: true},
		{name: "unknown", token: "zzz"},
		{name: "empty", token: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := r.Get(tt.token)
			if ok != tt.wantOK {
				t.Fatalf("Get(%q) ok = %t; want %t", tt.token, ok, tt.wantOK)
			}
			if !equalReservation(got, tt.want) {
				t.Fatalf("Get(%q) = %+v; want %+v", tt.token, got, tt.want)
			}
		})
	}
}

// equalReservation reports whether a and b hold the same values.
// expire does what the queuer's expiry loop does when it records an expiry: it takes
// the reservations whose lease ran out by now, and releases them. It returns them,
// earliest first.
func expire(r *Reserver, now time.Time) []Reservation {
	taken := r.TakeExpired(now, now.Add(time.Hour))
	for _, res := range taken {
		r.Release(res.Token)
	}
	return taken
}

// earliestExpiry is the expiry at the top of r's heap; false when r holds nothing.
func earliestExpiry(r *Reserver) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mu.expiry) == 0 {
		return time.Time{}, false
	}
	return r.mu.expiry[0].expiresAt, true
}

// inflightShards returns shard -> number of live reservations, for the shards that
// have some.
func inflightShards(r *Reserver) map[int]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int]int, len(r.mu.byShard))
	for shard, l := range r.mu.byShard {
		out[shard] = l.n
	}
	return out
}

func equalReservation(a, b Reservation) bool {
	return a.Token == b.Token && a.Key == b.Key && a.Shard == b.Shard &&
		a.Generation == b.Generation && a.Retries == b.Retries && a.Consumer == b.Consumer &&
		a.ExpiresAt.Equal(b.ExpiresAt) && maps.Equal(a.Values, b.Values)
}

func TestRelease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		tokens     []string // released in turn
		wantOK     []bool
		wantLen    int
		wantShards map[int]int
		wantNext   time.Time
	}{
		{name: "one", tokens: []string{"b"}, wantOK: []bool{true}, wantLen: 2, wantShards: map[int]int{0: 1, 1: 1}, wantNext: at(10)},
		{name: "earliest", tokens: []string{"a"}, wantOK: []bool{true}, wantLen: 2, wantShards: map[int]int{0: 1, 1: 1}, wantNext: at(20)},
		{name: "twice", tokens: []string{"a", "a"}, wantOK: []bool{true, false}, wantLen: 2, wantShards: map[int]int{0: 1, 1: 1}, wantNext: at(20)},
		{name: "unknown", tokens: []string{"zzz"}, wantOK: []bool{false}, wantLen: 3, wantShards: map[int]int{0: 2, 1: 1}, wantNext: at(10)},
		{name: "whole shard", tokens: []string{"a", "b"}, wantOK: []bool{true, true}, wantLen: 1, wantShards: map[int]int{1: 1}, wantNext: at(20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, mk("a", 1, 0, 0, 10, "k", "1"), mk("b", 1, 1, 0, 30, "k", "1"), mk("c", 2, 0, 1, 20, "k", "2"))
			for i, token := range tt.tokens {
				res, ok := r.Release(token)
				if ok != tt.wantOK[i] {
					t.Fatalf("Release(%q) #%d ok = %t; want %t", token, i, ok, tt.wantOK[i])
				}
				if ok && res.Token != token {
					t.Fatalf("Release(%q) returned token %q", token, res.Token)
				}
				checkInvariants(t, r)
			}
			if got := r.Len(); got != tt.wantLen {
				t.Fatalf("Len() = %d; want %d", got, tt.wantLen)
			}
			if got := inflightShards(r); !maps.Equal(got, tt.wantShards) {
				t.Fatalf("in-flight shards = %v; want %v", got, tt.wantShards)
			}
			if got, _ := earliestExpiry(r); !got.Equal(tt.wantNext) {
				t.Fatalf("earliest expiry %v; want %v", got, tt.wantNext)
			}
		})
	}
}

func TestReleaseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		key       Key
		wantToken string
		wantOK    bool
		wantLen   int
	}{
		{name: "live", key: Key{1, 1}, wantToken: "b", wantOK: true, wantLen: 2},
		{name: "other chunk of submission", key: Key{1, 2}, wantLen: 3},
		{name: "unknown submission", key: Key{9, 0}, wantLen: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, mk("a", 1, 0, 0, 10, "k", "1"), mk("b", 1, 1, 0, 30, "k", "1"), mk("c", 2, 0, 1, 20))
			res, ok := r.ReleaseKey(tt.key)
			if ok != tt.wantOK || res.Token != tt.wantToken {
				t.Fatalf("ReleaseKey(%v) = %q, %t; want %q, %t", tt.key, res.Token, ok, tt.wantToken, tt.wantOK)
			}
			checkInvariants(t, r)
			if got := r.Len(); got != tt.wantLen {
				t.Fatalf("Len() = %d; want %d", got, tt.wantLen)
			}
			if _, ok := r.Get(tt.wantToken); tt.wantOK && ok {
				t.Fatalf("Get(%q) after ReleaseKey found it; want gone", tt.wantToken)
			}
			if _, ok := r.Release(tt.wantToken); tt.wantOK && ok {
				t.Fatalf("Release(%q) after ReleaseKey = true; want false", tt.wantToken)
			}
		})
	}
}

func TestExtend(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		token      string
		to         int
		wantOK     bool
		wantNext   time.Time
		wantExpire []string // expire(r, at(25))
	}{
		{name: "later", token: "a", to: 40, wantOK: true, wantNext: at(20), wantExpire: []string{"c"}},
		{name: "earlier", token: "b", to: 5, wantOK: true, wantNext: at(5), wantExpire: []string{"b", "a", "c"}},
		{name: "same", token: "a", to: 10, wantOK: true, wantNext: at(10), wantExpire: []string{"a", "c"}},
		{name: "tie keeps reservation order", token: "c", to: 10, wantOK: true, wantNext: at(10), wantExpire: []string{"a", "c"}},
		{name: "middle to last", token: "c", to: 35, wantOK: true, wantNext: at(10), wantExpire: []string{"a"}},
		{name: "unknown", token: "zzz", to: 1, wantNext: at(10), wantExpire: []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, mk("a", 1, 0, 0, 10), mk("b", 1, 1, 0, 30), mk("c", 2, 0, 1, 20))
			res, ok := r.Extend(tt.token, at(tt.to))
			if ok != tt.wantOK {
				t.Fatalf("Extend(%q) ok = %t; want %t", tt.token, ok, tt.wantOK)
			}
			if ok && (res.Token != tt.token || !res.ExpiresAt.Equal(at(tt.to))) {
				t.Fatalf("Extend(%q) = %q expiring %v; want expiring %v", tt.token, res.Token, res.ExpiresAt, at(tt.to))
			}
			if got, ok := r.Get(tt.token); ok && !got.ExpiresAt.Equal(at(tt.to)) {
				t.Fatalf("Get(%q).ExpiresAt = %v; want %v", tt.token, got.ExpiresAt, at(tt.to))
			}
			checkInvariants(t, r)
			if got, _ := earliestExpiry(r); !got.Equal(tt.wantNext) {
				t.Fatalf("earliest expiry %v; want %v", got, tt.wantNext)
			}
			if got := tokens(expire(r, at(25))); !slices.Equal(got, tt.wantExpire) {
				t.Fatalf("expire(r, t0+25s) = %q; want %q", got, tt.wantExpire)
			}
			checkInvariants(t, r)
		})
	}
}

func TestDropShard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		shard      int
		want       []string
		wantShards map[int]int
		wantValues map[string]int // value of "company_id" -> count
	}{
		{name: "several", shard: 0, want: []string{"a", "b", "d"}, wantShards: map[int]int{1: 1}, wantValues: map[string]int{"1": 0, "2": 1}},
		{name: "one", shard: 1, want: []string{"c"}, wantShards: map[int]int{0: 3}, wantValues: map[string]int{"1": 2, "2": 1}},
		{name: "none", shard: 2, want: nil, wantShards: map[int]int{0: 3, 1: 1}, wantValues: map[string]int{"1": 2, "2": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t,
				mk("a", 1, 0, 0, 30, "company_id", "1"),
				mk("b", 1, 1, 0, 10, "company_id", "1"),
				mk("c", 2, 0, 1, 20, "company_id", "2"),
				mk("d", 2, 1, 0, 20, "company_id", "2"),
			)
			got := r.DropShard(tt.shard)
			if !slices.Equal(tokens(got), tt.want) {
				t.Fatalf("DropShard(%d) = %q; want %q (in reservation order)", tt.shard, tokens(got), tt.want)
			}
			checkInvariants(t, r)
			if got := inflightShards(r); !maps.Equal(got, tt.wantShards) {
				t.Fatalf("in-flight shards = %v; want %v", got, tt.wantShards)
			}
			if got := r.InflightShard(tt.shard); got != 0 {
				t.Fatalf("InflightShard(%d) = %d; want 0", tt.shard, got)
			}
			for v, want := range tt.wantValues {
				if got := r.InflightValue("company_id", v); got != want {
					t.Fatalf("InflightValue(company_id, %s) = %d; want %d", v, got, want)
				}
			}
			if again := r.DropShard(tt.shard); again != nil {
				t.Fatalf("second DropShard(%d) = %q; want nil", tt.shard, tokens(again))
			}
		})
	}
}

// TestShardReservations: ShardReservations lists a shard's reservations in reservation
// order and leaves them held.
func TestShardReservations(t *testing.T) {
	t.Parallel()
	r := setup(t,
		mk("a", 1, 0, 0, 30, "company_id", "1"),
		mk("b", 1, 1, 0, 10, "company_id", "1"),
		mk("c", 2, 0, 1, 20, "company_id", "2"),
		mk("d", 2, 1, 0, 20, "company_id", "2"),
	)
	if got := tokens(r.ShardReservations(0)); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Fatalf("ShardReservations(0) = %q; want [a b d] (in reservation order)", got)
	}
	if got := r.ShardReservations(2); got != nil {
		t.Fatalf("ShardReservations(2) = %q; want nil", tokens(got))
	}
	if got := r.InflightShard(0); got != 3 {
		t.Fatalf("InflightShard(0) after ShardReservations = %d; want 3 (still held)", got)
	}
	checkInvariants(t, r)
}

// TestTakeExpired: TakeExpired returns the reservations due, earliest first (ties in
// reservation order), and holds them until they are released.
func TestTakeExpired(t *testing.T) {
	t.Parallel()
	// Reserved in this order; the expiry is the number after the token.
	all := []Reservation{
		mk("e30", 1, 0, 0, 30),
		mk("e10", 1, 1, 1, 10),
		mk("e20a", 1, 2, 0, 20),
		mk("e5", 1, 3, 2, 5),
		mk("e20b", 1, 4, 1, 20),
		mk("e40", 1, 5, 0, 40),
	}
	tests := []struct {
		name     string
		now      time.Time
		want     []string
		wantNext time.Time
	}{
		{name: "none due", now: at(4), want: nil, wantNext: at(5)},
		{name: "exactly at expiry", now: at(5), want: []string{"e5"}, wantNext: at(10)},
		{name: "just before tie", now: at(20).Add(-time.Nanosecond), want: []string{"e5", "e10"}, wantNext: at(20)},
		{name: "ties in reservation order", now: at(20), want: []string{"e5", "e10", "e20a", "e20b"}, wantNext: at(30)},
		{name: "all", now: at(100), want: []string{"e5", "e10", "e20a", "e20b", "e30", "e40"}},
		{name: "zero time", now: time.Time{}, want: nil, wantNext: at(5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setup(t, all...)
			got := r.TakeExpired(tt.now, tt.now.Add(time.Hour))
			if !slices.Equal(tokens(got), tt.want) {
				t.Fatalf("TakeExpired(%v) = %q; want %q", tt.now, tokens(got), tt.want)
			}
			checkInvariants(t, r)
			if got := r.Len(); got != len(all) {
				t.Fatalf("Len() before Release = %d; want %d (taken reservations stay held)", got, len(all))
			}
			for _, res := range got {
				if _, ok := r.Release(res.Token); !ok {
					t.Fatalf("Release(%q) of a taken reservation = false; want true", res.Token)
				}
			}
			checkInvariants(t, r)
			if got := r.Len(); got != len(all)-len(tt.want) {
				t.Fatalf("Len() = %d; want %d", got, len(all)-len(tt.want))
			}
			next, ok := earliestExpiry(r)
			if ok != !tt.wantNext.IsZero() || !next.Equal(tt.wantNext) {
				t.Fatalf("earliest expiry %v, %t; want %v", next, ok, tt.wantNext)
			}
			if again := r.TakeExpired(tt.now, tt.now.Add(time.Hour)); again != nil {
				t.Fatalf("second TakeExpired(%v) = %q; want nil", tt.now, tokens(again))
			}
		})
	}
}

// TestEarliestExpiry: the top of the expiry heap, which the next TakeExpired starts
// from, is the earliest expiry of the live reservations.
func TestEarliestExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		ops    func(r *Reserver)
		want   time.Time
		wantOK bool
	}{
		{name: "empty", ops: func(r *Reserver) {}},
		{name: "one", ops: func(r *Reserver) { r.Reserve(mk("a", 1, 0, 0, 10)) }, want: at(10), wantOK: true},
		{name: "earliest of several", ops: func(r *Reserver) {
			r.Reserve(mk("a", 1, 0, 0, 10))
			r.Reserve(mk("b", 1, 1, 0, 5))
			r.Reserve(mk("c", 1, 2, 0, 7))
		}, want: at(5), wantOK: true},
		{name: "after releasing earliest", ops: func(r *Reserver) {
			r.Reserve(mk("a", 1, 0, 0, 10))
			r.Reserve(mk("b", 1, 1, 0, 5))
			r.Release("b")
		}, want: at(10), wantOK: true},
		{name: "after extending earliest", ops: func(r *Reserver) {
			r.Reserve(mk("a", 1, 0, 0, 10))
			r.Reserve(mk("b", 1, 1, 0, 5))
			r.Extend("b", at(15))
		}, want: at(10), wantOK: true},
		{name: "after releasing all", ops: func(r *Reserver) {
			r.Reserve(mk("a", 1, 0, 0, 10))
			r.Release("a")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New(Config{})
			tt.ops(r)
			got, ok := earliestExpiry(r)
			if ok != tt.wantOK || !got.Equal(tt.want) {
				t.Fatalf("earliest expiry %v, %t; want %v, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestInflight(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		ops        func(r *Reserver)
		wantShards map[int]int
		wantValues map[[2]string]int
	}{
		{
			name:       "empty",
			ops:        func(r *Reserver) {},
			wantShards: map[int]int{},
			wantValues: map[[2]string]int{{"company_id", "42"}: 0},
		},
		{
			name: "mixed",
			ops: func(r *Reserver) {
				r.Reserve(mk("a", 1, 0, 0, 10, "company_id", "42", "mode", `"preview"`))
				r.Reserve(mk("b", 1, 1, 1, 10, "company_id", "42", "mode", `"preview"`))
				r.Reserve(mk("c", 2, 0, 1, 10, "company_id", "43"))
				r.Reserve(mk("d", 3, 0, 2, 10))
			},
			wantShards: map[int]int{0: 1, 1: 2, 2: 1},
			wantValues: map[[2]string]int{
				{"company_id", "42"}:     2,
				{"company_id", "43"}:     1,
				{"mode", `"preview"`}:    2,
				{"mode", "preview"}:      0, // canonical text: a string value is quoted
				{"company_id", `"42"`}:   0,
				{"other", "42"}:          0,
				{"company_id", "44"}:     0,
				{"mode", `"production"`}: 0,
			},
		},
		{
			name: "after every kind of removal",
			ops: func(r *Reserver) {
				r.Reserve(mk("a", 1, 0, 0, 10, "company_id", "42"))
				r.Reserve(mk("b", 1, 1, 1, 20, "company_id", "42"))
				r.Reserve(mk("c", 2, 0, 1, 30, "company_id", "43"))
				r.Reserve(mk("d", 3, 0, 2, 40, "company_id", "43"))
				r.Reserve(mk("e", 3, 1, 3, 50, "company_id", "44"))
				r.Reserve(mk("f", 3, 2, 3, 60, "company_id", "44"))
				expire(r, at(10))       // a
				r.Release("c")          // c
				r.ReleaseKey(Key{3, 0}) // d
				r.DropShard(3)          // e, f
				r.Reserve(mk("g", 4, 0, 1, 70, "company_id", "45"))
			},
			wantShards: map[int]int{1: 2},
			wantValues: map[[2]string]int{
				{"company_id", "42"}: 1,
				{"company_id", "43"}: 0,
				{"company_id", "44"}: 0,
				{"company_id", "45"}: 1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := New(Config{})
			tt.ops(r)
			checkInvariants(t, r)
			if got := inflightShards(r); !maps.Equal(got, tt.wantShards) {
				t.Fatalf("in-flight shards = %v; want %v", got, tt.wantShards)
			}
			for shard := range 5 {
				if got := r.InflightShard(shard); got != tt.wantShards[shard] {
					t.Fatalf("InflightShard(%d) = %d; want %d", shard, got, tt.wantShards[shard])
				}
			}
			for kv, want := range tt.wantValues {
				if got := r.InflightValue(kv[0], kv[1]); got != want {
					t.Fatalf("InflightValue(%q, %q) = %d; want %d", kv[0], kv[1], got, want)
				}
			}
			total := 0
			for _, n := range tt.wantShards {
				total += n
			}
			if got := r.Len(); got != total {
				t.Fatalf("Len() = %d; want %d", got, total)
			}
		})
	}
}

// TestValuesCountsDoNotGrow checks that counts reaching 0 are deleted, so
// many distinct values over time do not grow the reserver.
func TestValuesCountsDoNotGrow(t *testing.T) {
	t.Parallel()
	r := New(Config{})
	for i := range 10_000 {
		res := mk(fmt.Sprint("tok-", i), int64(i), 0, i%64, i, "company_id", fmt.Sprint(i))
		if !r.Reserve(res) {
			t.Fatalf("Reserve(%d) = false; want true", i)
		}
		if i%2 == 0 {
			r.Release(res.Token)
		}
	}
	expire(r, at(1_000_000))
	r.mu.Lock()
	shards, values := len(r.mu.byShard), len(r.mu.byValue)
	r.mu.Unlock()
	if shards != 0 || values != 0 {
		t.Fatalf("after removing everything: %d shard lists, %d value counts; want 0 and 0", shards, values)
	}
	if got := r.Len(); got != 0 {
		t.Fatalf("Len() = %d; want 0", got)
	}
}

// TestSharedValues checks that reservations may share one Values map, as the
// reservations of one submission do.
func TestSharedValues(t *testing.T) {
	t.Parallel()
	values := map[string]string{"company_id": "42", "mode": `"preview"`}
	r := New(Config{})
	for i := range 100 {
		res := mk(fmt.Sprint("tok-", i), 1, int32(i), i%4, i)
		res.Values = values
		r.Reserve(res)
	}
	if got := r.InflightValue("company_id", "42"); got != 100 {
		t.Fatalf("InflightValue(company_id, 42) = %d; want 100", got)
	}
	r.DropShard(0)
	expire(r, at(49))
	checkInvariants(t, r)
	if got := r.InflightValue("mode", `"preview"`); got != r.Len() {
		t.Fatalf("InflightValue(mode, preview) = %d; want Len() = %d", got, r.Len())
	}
}

// TestConcurrent runs many goroutines that race to reserve the same chunks,
// extend, release and expire them; each chunk must be won by exactly one.
// Run it with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const (
		workers = 16
		chunks  = 2_000
	)
	r := New(Config{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins = make(map[Key]int)
	)
	for w := range workers {
		wg.Go(func() {
			for i := range chunks {
				key := Key{SubmissionID: int64(i % 50), ChunkIndex: int32(i)}
				res := Reservation{
					Token:     fmt.Sprintf("w%d-%d", w, i),
					Key:       key,
					Shard:     i % 8,
					ExpiresAt: at(i + chunks), // after every TakeExpired below
					Values:    map[string]string{"company_id": fmt.Sprint(i % 7)},
				}
				if !r.Reserve(res) {
					continue
				}
				mu.Lock()
				wins[key]++
				mu.Unlock()
				// Readers and writers on the shared state.
				r.IsReserved(key)
				r.InflightShard(i % 8)
				inflightShards(r)
				r.InflightValue("company_id", fmt.Sprint(i%7))
				r.Len()
				if _, ok := r.Extend(res.Token, at(i+2*chunks)); !ok {
					t.Errorf("Extend(%q) of a live reservation = false", res.Token)
				}
				if _, ok := r.Get(res.Token); !ok {
					t.Errorf("Get(%q) of a live reservation = false", res.Token)
				}
				if w%4 == 0 {
					expire(r, at(i%100)) // due for none: all expire after t0+chunks
				}
			}
		})
	}
	wg.Wait()
	if len(wins) != chunks {
		t.Fatalf("%d chunks reserved; want %d", len(wins), chunks)
	}
	for key, n := range wins {
		if n != 1 {
			t.Fatalf("chunk %v reserved %d times; want once", key, n)
		}
	}
	checkInvariants(t, r)

	// Now remove them concurrently by every path.
	for w := range workers {
		wg.Go(func() {
			for i := w; i < chunks; i += workers {
				key := Key{SubmissionID: int64(i % 50), ChunkIndex: int32(i)}
				switch w % 4 {
				case 0:
					r.ReleaseKey(key)
				case 1:
					r.DropShard(i % 8)
				case 2:
					expire(r, at(i+chunks))
				case 3:
					r.ReleaseKey(key)
				}
			}
		})
	}
	wg.Wait()
	expire(r, at(10*chunks))
	checkInvariants(t, r)
	if got := r.Len(); got != 0 {
		t.Fatalf("Len() = %d after removing everything; want 0", got)
	}
}
