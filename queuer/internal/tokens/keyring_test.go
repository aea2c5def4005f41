package tokens

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opsq/sql/pgtest"
)

func TestKeyringSignVerify(t *testing.T) {
	t.Parallel()
	now := time.Now()
	k := testKeyring(
		clusterKey{id: 1, secret: testSecret(1), until: now.Add(-time.Second)}, // past its overlap
		clusterKey{id: 2, secret: testSecret(2), until: now.Add(time.Hour)},    // within it
		clusterKey{id: 3, secret: testSecret(3)},                               // the newest
	)
	msg := []byte("a forwarded request")
	id, mac := k.Sign(func(int) []byte { return msg })
	if id != 3 || len(mac) != MACLen {
		t.Fatalf("Sign = key %d, %d-byte MAC; want key 3, %d bytes", id, len(mac), MACLen)
	}
	macUnder := func(s secret) []byte { return macOf(s, msg) }
	for _, tc := range []struct {
		name string
		id   int
		msg  []byte
		mac  []byte
		want bool
	}{
		{"newest key", 3, msg, mac, true},
		{"older key within its overlap", 2, msg, macUnder(testSecret(2)), true},
		{"older key past its overlap", 1, msg, macUnder(testSecret(1)), false},
		{"another key's id", 2, msg, mac, false},
		{"unknown key", 4, msg, macUnder(testSecret(4)), false},
		{"another message", 3, []byte("a forwarded request!"), mac, false},
		{"truncated MAC", 3, msg, mac[:MACLen-1], false},
		{"full HMAC-SHA256", 3, msg, append(append([]byte{}, mac...), make([]byte, 16)...), false},
		{"no MAC", 3, msg, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := k.Verify(tc.id, tc.msg, tc.mac); got != tc.want {
				t.Errorf("Verify(%d, %q, %x) = %v; want %v", tc.id, tc.msg, tc.mac, got, tc.want)
			}
		})
	}
}

// The newest key signs once it is KeyActivation old; until then the one before it does.
func TestKeyringSigningKey(t *testing.T) {
	t.Parallel()
	now := time.Now()
	old := clusterKey{id: 1, secret: testSecret(1), signsFrom: now.Add(-time.Hour), until: now.Add(time.Hour)}
	young := clusterKey{id: 2, secret: testSecret(2), signsFrom: now.Add(time.Minute)}
	older := clusterKey{id: 3, secret: testSecret(3), signsFrom: now.Add(-time.Second)}
	for _, tc := range []struct {
		name string
		keys []clusterKey
		want int
	}{
		{"one key", []clusterKey{old}, 1},
		{"a new key not yet active", []clusterKey{old, young}, 1},
		{"only keys not yet active: the oldest", []clusterKey{young, {id: 4, secret: testSecret(4), signsFrom: now.Add(time.Minute)}}, 2},
		{"the newest active key", []clusterKey{old, older}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := testKeyring(tc.keys...)
			id, mac := k.Sign(func(int) []byte { return []byte("m") })
			if id != tc.want {
				t.Fatalf("signed with key %d; want %d", id, tc.want)
			}
			if !k.Verify(id, []byte("m"), mac) {
				t.Fatal("the signature does not verify")
			}
		})
	}
	k := testKeyring(old, young)
	if !k.Verify(2, []byte("m"), macOf(young.secret, []byte("m"))) {
		t.Error("a key not yet signing does not verify; want it to, from the moment it is loaded")
	}
}

// No way of printing or logging a key shows its secret.
func TestKeyringSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	s := secret("0123456789abcdef-the-secret")
	k := testKeyring(clusterKey{id: 1, secret: s})
	ck := k.signingKey()
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	log.Info("keys", slog.Any("keyring", k), slog.Any("key", ck), slog.Any("secret", ck.secret))
	log.Info("text", "secret", ck.secret)
	slog.New(slog.NewTextHandler(&out, nil)).Info("keys", slog.Any("keyring", k), slog.Any("secret", ck.secret))
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%q", "%d"} {
		fmt.Fprintf(&out, verb+"\n", ck)
		fmt.Fprintf(&out, verb+"\n", k)
		fmt.Fprintf(&out, verb+"\n", ck.secret)
	}
	hex := fmt.Sprintf("%x", []byte(s))
	for _, leak := range []string{string(s), "the-secret", hex, fmt.Sprint([]byte(s))[1:20]} {
		if strings.Contains(out.String(), leak) {
			t.Fatalf("the secret shows in:\n%s", out.String())
		}
	}
	if !strings.Contains(out.String(), "[secret]") {
		t.Fatalf("want [secret] in place of the secret; got:\n%s", out.String())
	}
}

// The migration creates one key of 32 bytes, and another database migrated on its own has
// another secret.
func TestClusterKeyMigration(t *testing.T) {
	t.Parallel()
	a := pgtest.NewPool(t)
	b := poolOf(t, pgtest.NewDBWithShards(t, 8)) // migrated from scratch, not copied
	var secrets [][]byte
	for _, pool := range []*pgxpool.Pool{a, b} {
		var id, n int
		var s []byte
		if err := pool.QueryRow(t.Context(), "SELECT min(id), count(*), (array_agg(secret))[1] FROM opsq.cluster_keys").Scan(&id, &n, &s); err != nil {
			t.Fatal(err)
		}
		if n != 1 || id != 1 || len(s) != 32 {
			t.Fatalf("after migrating: %d keys, the first with id %d and %d secret bytes; want 1 key, id 1, 32 bytes", n, id, len(s))
		}
		secrets = append(secrets, s)
	}
	if bytes.Equal(secrets[0], secrets[1]) {
		t.Fatal("two databases migrated apart have the same cluster secret")
	}
}

// Load fails, saying what to do, without a cluster key (the queuer's Start fails with it).
func TestLoadWithoutClusterKey(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), "DELETE FROM opsq.cluster_keys"); err != nil {
		t.Fatal(err)
	}
	err := NewKeyring(pool, slog.New(slog.DiscardHandler)).Load(t.Context())
	if err == nil || !strings.Contains(err.Error(), "no cluster key") || !strings.Contains(err.Error(), "migrate up") {
		t.Fatalf("Load without a cluster key: %v; want an error saying there is no cluster key and what to run", err)
	}
}

// poolOf connects to dbURL until the test ends.
func poolOf(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// The pooled HMAC states give the MAC a fresh state gives, whichever key the pooled state
// was made for: keys alternating, from several goroutines.
func TestMACPooledStates(t *testing.T) {
	t.Parallel()
	keys := []secret{testSecret(1), testSecret(2)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				s := keys[(g+i)%2]
				msg := []byte(fmt.Sprintf("message %d of %d", i, g))
				h := hmac.New(sha256.New, s)
				h.Write(msg)
				if want, got := h.Sum(nil)[:MACLen], macOf(s, msg); !bytes.Equal(got, want) {
					t.Errorf("macOf(key %d, %q) = %x, want %x", (g+i)%2+1, msg, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkMAC: a MAC of a token's message from a pooled state, and from a state made for
// each MAC (what macOf did before the pool).
func BenchmarkMAC(b *testing.B) {
	s, msg := testSecret(1), sampleToken().macMessage()
	b.Run("pooled", func(b *testing.B) {
		for b.Loop() {
			macOf(s, msg)
		}
	})
	b.Run("new state", func(b *testing.B) {
		for b.Loop() {
			h := hmac.New(sha256.New, s)
			h.Write(msg)
			_ = h.Sum(nil)[:MACLen]
		}
	})
}
