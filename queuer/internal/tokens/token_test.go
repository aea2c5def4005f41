package tokens

import (
	"encoding/base64"
	"encoding/binary"
	"log/slog"
	"strings"
	"testing"
	"time"

	"opsq/reserver"
)

// base64url is the alphabet of a token's text.
const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// testKeyring returns a keyring holding keys, without a database; the highest id signs.
func testKeyring(keys ...clusterKey) *Keyring {
	k := NewKeyring(nil, slog.New(slog.DiscardHandler))
	k.mu.keys = map[int]clusterKey{}
	for _, ck := range keys {
		k.mu.keys[ck.id] = ck
	}
	return k
}

func testSecret(b byte) secret { return secret(strings.Repeat(string(rune('a'+b)), 32)) }

// sampleToken is the same in every process (the fuzzing workers make their own seeds).
func sampleToken() Token {
	return Token{Key: reserver.Key{SubmissionID: 1234567890123, ChunkIndex: 42}, Shard: 17, Generation: 9, Retries: 2, nonce: 0x5eed5eed5eed5eed}
}

// rawToken encodes a token's bytes with fields changed by edit, and a MAC over them under
// s, so that only what edit changes makes it invalid.
func rawToken(s secret, keyID uint32, edit func(b []byte) []byte) string {
	t := sampleToken()
	t.keyID = int(keyID)
	b := t.signedBytes()
	b = edit(b)
	mac := macOf(s, append([]byte(tokenMACLabel), b...))
	return base64.RawURLEncoding.EncodeToString(append(b, mac...))
}

func TestTokenEncoding(t *testing.T) {
	t.Parallel()
	keys := testKeyring(clusterKey{id: 1, secret: testSecret(1)})
	other := testKeyring(clusterKey{id: 1, secret: testSecret(2)})
	good := sampleToken().Signed(keys)
	goodText := good.String()
	noEdit := func(b []byte) []byte { return b }
	for _, tc := range []struct {
		name     string
		text     string
		parses   bool
		verifies bool
	}{
		{"round trip", goodText, true, true},
		{"signed by hand like the keyring", rawToken(testSecret(1), 1, noEdit), true, true},
		{"empty", "", false, false},
		{"truncated by one character", goodText[:len(goodText)-1], false, false},
		{"one character more", goodText + "A", false, false},
		{"with a newline, which base64 would skip", goodText[:10] + "\n" + goodText[10:len(goodText)-1], false, false},
		{"padded", goodText + "==", false, false},
		{"a character of standard base64", goodText[:5] + "+" + goodText[6:], false, false},
		{"bad length (unsigned, version 1 layout)", base64.RawURLEncoding.EncodeToString(append([]byte{1}, make([]byte, 34)...)), false, false},
		{"bad version", rawToken(testSecret(1), 1, func(b []byte) []byte { b[0] = 1; return b }), false, false},
		{"submission id 0", rawToken(testSecret(1), 1, func(b []byte) []byte { binary.BigEndian.PutUint64(b[1:], 0); return b }), false, false},
		{"negative chunk index", rawToken(testSecret(1), 1, func(b []byte) []byte { binary.BigEndian.PutUint32(b[9:], 1<<31); return b }), false, false},
		{"negative retries", rawToken(testSecret(1), 1, func(b []byte) []byte { binary.BigEndian.PutUint32(b[23:], 1<<31); return b }), false, false},
		{"key id 0", rawToken(testSecret(1), 0, noEdit), false, false},
		{"unknown key id", rawToken(testSecret(1), 7, noEdit), true, false},
		{"bad mac: another secret", rawToken(testSecret(2), 1, noEdit), true, false},
		{"bad mac: zero", base64.RawURLEncoding.EncodeToString(append(good.signedBytes(), make([]byte, MACLen)...)), true, false},
		{"bad mac: a chunk index changed after signing", func() string { u := good; u.Key.ChunkIndex++; return u.String() }(), true, false},
		{"bad mac: signed by another database", sampleToken().Signed(other).String(), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Parse(tc.text)
			if (err == nil) != tc.parses {
				t.Fatalf("Parse(%q) error %v; want parses=%v", tc.text, err, tc.parses)
			}
			if !tc.parses {
				return
			}
			if got := tok.String(); got != tc.text {
				t.Errorf("re-encoded as %q; want %q", got, tc.text)
			}
			if got := tok.verify(keys); got != tc.verifies {
				t.Errorf("verify = %v; want %v", got, tc.verifies)
			}
		})
	}
	parsed, err := Parse(goodText)
	if err != nil {
		t.Fatal(err)
	}
	if parsed != good {
		t.Errorf("round trip: %+v; want %+v", parsed, good)
	}
	if len(goodText) != tokenEncodedLen || tokenEncodedLen != 74 {
		t.Errorf("token text of %d characters (tokenEncodedLen %d); want 74", len(goodText), tokenEncodedLen)
	}
}

// Every one-character change of a signed token fails to parse or to verify.
func TestTokenEveryOneCharacterChangeIsRefused(t *testing.T) {
	t.Parallel()
	keys := testKeyring(clusterKey{id: 1, secret: testSecret(1)})
	good := sampleToken().Signed(keys).String()
	n := 0
	for _, changed := range oneCharacterChanges(good) {
		if tok, err := Parse(changed); err == nil && tok.verify(keys) {
			t.Fatalf("%q (one character changed from %q) verifies", changed, good)
		}
		n++
	}
	if want := len(good) * (len(base64url) - 1); n != want {
		t.Fatalf("tried %d changes; want %d", n, want)
	}
}

// oneCharacterChanges returns every token that differs from tok in one character, taken
// from the base64url alphabet.
func oneCharacterChanges(tok string) []string {
	var out []string
	for i := range len(tok) {
		for _, c := range []byte(base64url) {
			if c == tok[i] {
				continue
			}
			out = append(out, tok[:i]+string(c)+tok[i+1:])
		}
	}
	return out
}

// FuzzParseToken: parsing never panics, a text that parses re-encodes to itself, and a
// text other than the signed token never verifies. Run it with
// go test -run '^$' -fuzz FuzzParseToken ./queuer/internal/tokens/
func FuzzParseToken(f *testing.F) {
	keys := testKeyring(clusterKey{id: 1, secret: testSecret(1), until: time.Now().Add(time.Hour)},
		clusterKey{id: 2, secret: testSecret(2)}) // key 2 signs, key 1 verifies still
	old := testKeyring(clusterKey{id: 1, secret: testSecret(1)})
	real := []string{sampleToken().Signed(keys).String(), sampleToken().Signed(old).String()}
	for _, tok := range real {
		f.Add(tok)
		f.Add(tok[:len(tok)-1])
		f.Add(tok[:len(tok)/2])
		f.Add(tok + "A")
		flipped := []byte(tok)
		flipped[len(flipped)/2] ^= 1
		f.Add(string(flipped))
		f.Add(strings.ToUpper(tok))
	}
	f.Add("")
	f.Add(strings.Repeat("A", tokenEncodedLen))
	f.Add(strings.Repeat("_", tokenEncodedLen))
	f.Add(base64.RawURLEncoding.EncodeToString(append([]byte{1}, make([]byte, 34)...)))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := Parse(s)
		if err != nil {
			return
		}
		if got := tok.String(); got != s {
			t.Fatalf("Parse(%q) re-encodes as %q", s, got)
		}
		if tok.verify(keys) && s != real[0] && s != real[1] {
			t.Fatalf("%q verifies, but it is none of the signed tokens", s)
		}
	})
}

// TestNewTokenKeepsItsFieldsAndDrawsANonce: newToken keeps what it is given, and two
// tokens of the same reservation differ by their nonce, so their texts differ.
func TestNewTokenKeepsItsFieldsAndDrawsANonce(t *testing.T) {
	t.Parallel()
	keys := testKeyring(clusterKey{id: 3, secret: testSecret(3)})
	key := reserver.Key{SubmissionID: 77, ChunkIndex: 5}
	seen := map[string]bool{}
	for range 100 {
		tok := New(key, 12, 4, 1)
		if tok.Key != key || tok.Shard != 12 || tok.Generation != 4 || tok.Retries != 1 {
			t.Fatalf("New(%v, 12, 4, 1) = %+v; want those fields", key, tok)
		}
		text := tok.Signed(keys).String()
		if seen[text] {
			t.Fatalf("newToken made %q twice; want a new nonce every time", text)
		}
		seen[text] = true
	}
}

// TestTokenOfARetiredKeyIsRefused: a token signed by a key whose overlap has passed does
// not verify, one signed by the previous key within the overlap does.
func TestTokenOfARetiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	tok := sampleToken().Signed(testKeyring(clusterKey{id: 1, secret: testSecret(1)}))
	within := testKeyring(clusterKey{id: 1, secret: testSecret(1), until: time.Now().Add(time.Hour)}, clusterKey{id: 2, secret: testSecret(2)})
	if !tok.verify(within) {
		t.Error("a token of the previous key within its overlap does not verify; want it to")
	}
	past := testKeyring(clusterKey{id: 1, secret: testSecret(1), until: time.Now().Add(-time.Second)}, clusterKey{id: 2, secret: testSecret(2)})
	if tok.verify(past) {
		t.Error("a token of a key past its overlap verifies; want it refused")
	}
}

// TestRead: a consumer's token is read only when it parses, verifies and names a
// shard of this database.
func TestRead(t *testing.T) {
	t.Parallel()
	keys := testKeyring(clusterKey{id: 1, secret: testSecret(1)})
	good := sampleToken().Signed(keys)
	if got, ok := keys.Read(good.String(), 64); !ok || got != good {
		t.Errorf("Read(a signed token) = %+v, %t; want %+v, true", got, ok, good)
	}
	last := sampleToken()
	last.Shard = 63
	if _, ok := keys.Read(last.Signed(keys).String(), 64); !ok {
		t.Error("Read(a token of the last shard) = false; want true")
	}
	for name, text := range map[string]string{
		"malformed":             good.String()[1:],
		"signed by another key": sampleToken().Signed(testKeyring(clusterKey{id: 1, secret: testSecret(2)})).String(),
		"a shard past the last": func() string { u := sampleToken(); u.Shard = 64; return u.Signed(keys).String() }(),
	} {
		if got, ok := keys.Read(text, 64); ok || got != (Token{}) {
			t.Errorf("Read(%s) = %+v, %t; want the zero token, false", name, got, ok)
		}
	}
}
