package peers

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"opsq/queuer/identity"
	"opsq/queuer/internal/tokens"
	"opsq/queuer/opsqtype"
)

// Requests one instance forwards to another (reserves and extends) are signed with the
// cluster key (DESIGN.md §8, "Between instances"): the signature covers the method, the
// path and query, a digest of the body (sent in opsqtype.ForwardedDigestHeader too, so
// that the receiver checks the signature before it reads the body), the time of sending, a nonce, the forwarding
// instance's id, the id of the instance it is sent to (opsqtype.ForwardedToHeader) and the
// caller's identity (opsqtype.ForwardedCallerHeader: its key's name and role, never the key
// itself), and is sent in opsqtype.ForwardedSignatureHeader as
//
//	v3 key=<cluster key id> at=<unix milliseconds> nonce=<base64url> mac=<base64url of the MAC>
//
// An instance acts on a request marked forwarded only when it is signed for this instance,
// its signature verifies under a cluster key it holds, it was made less than
// ForwardedMaxAge ago (or ahead, for clocks that disagree), and its nonce was not seen
// before (a Verifier keeps the nonces it accepted until their signatures are too old to
// verify anyway): a copy replayed, now or later, to this instance or to any other (each
// keeps its own nonces, so the destination is what stops a replay elsewhere), under any
// key or none, or one made without the cluster key, is refused.
//
// v2 signatures (before issue 31) did not cover the destination and are refused: during a
// rolling upgrade, forwards between an instance of each version fail (401 one way, the
// same the other way, as v2 verifiers refuse v3), and each consumer is served from the
// shards of the instances of its own version until the upgrade ends; no chunk is lost.

// ForwardedMaxAge is how far from this instance's clock a forwarded request's signing
// time may be.
const ForwardedMaxAge = 30 * time.Second

// maxSignatureHeader bounds the signature header read: a real one is about 90 bytes.
const maxSignatureHeader = 200

// maxCallerHeader bounds the caller header read: a key's name is at most 64 bytes.
const maxCallerHeader = 1024

// nonceLen is the bytes of a forwarded request's nonce.
const nonceLen = 16

// NoncesMaxDefault bounds the nonces a Verifier keeps: the forwarded requests it accepted
// in the last 2 × ForwardedMaxAge. Past it, forwarded requests are refused until the
// oldest nonces age out (a forwarded request refused is answered from elsewhere).
const NoncesMaxDefault = 1 << 18

// ErrForwardedSignature is returned by Verify for a request marked forwarded whose
// signature is missing, malformed, stale, replayed or wrong.
var ErrForwardedSignature = errors.New("a request marked forwarded by another instance has no valid signature")

// Forwarded is what marks and signs a forwarded request: the values of its headers.
type Forwarded struct {
	From      string // opsqtype.ForwardedHeader: the forwarding instance's id
	Signature string // opsqtype.ForwardedSignatureHeader
	Caller    string // opsqtype.ForwardedCallerHeader: the caller's identity, "" for none
	To        string // opsqtype.ForwardedToHeader: the id of the instance it is sent to
	// Digest is opsqtype.ForwardedDigestHeader: the hex SHA-256 of the body, which the
	// signature covers, so that the signature is checked before the body is read.
	Digest string
}

// Digest is the value of opsqtype.ForwardedDigestHeader for body.
func Digest(body []byte) string {
	d := sha256.Sum256(body)
	return hex.EncodeToString(d[:])
}

// forwardedMessage is what a forwarded request's MAC covers.
func forwardedMessage(keyID int, at int64, nonce, method, uri string, f Forwarded) []byte {
	return fmt.Appendf(nil, "opsq forwarded v3\n%d\n%d\n%s\n%s\n%s\n%s\n%s\n%s\n%s",
		keyID, at, nonce, method, uri, f.From, f.To, f.Caller, f.Digest)
}

// signForwarded returns the signature header of a forwarded request sent at now with nonce.
func signForwarded(k *tokens.Keyring, method, uri string, f Forwarded, body []byte, now time.Time, nonce string) string {
	at := now.UnixMilli()
	f.Digest = Digest(body)
	keyID, mac := k.Sign(func(keyID int) []byte { return forwardedMessage(keyID, at, nonce, method, uri, f) })
	return fmt.Sprintf("v3 key=%d at=%d nonce=%s mac=%s", keyID, at, nonce, base64.RawURLEncoding.EncodeToString(mac))
}

// newNonce returns a fresh random nonce.
func newNonce() string {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// encodeCaller is the caller header of id.
func encodeCaller(id identity.Caller) string {
	b, _ := json.Marshal(id) // strings only: never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCaller reads a caller header ("": none).
func decodeCaller(h string) (identity.Caller, bool, error) {
	if h == "" {
		return identity.Caller{}, false, nil
	}
	if len(h) > maxCallerHeader {
		return identity.Caller{}, false, errors.New("the caller header is too long")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(h)
	if err != nil {
		return identity.Caller{}, false, fmt.Errorf("the caller header: %w", err)
	}
	var id identity.Caller
	if err := json.Unmarshal(b, &id); err != nil || id.Name == "" || id.Role == "" {
		return identity.Caller{}, false, errors.New("the caller header holds no name and role")
	}
	return id, true, nil
}

// Verifier checks forwarded requests and remembers the nonces of those it accepted, so
// that each signature is good for one use. Safe for concurrent use.
type Verifier struct {
	keys *tokens.Keyring
	self string // this instance's id: the only destination it accepts
	max  int
	mu   struct {
		sync.Mutex
		seen  map[string]time.Time // nonce -> when it may be forgotten
		order []seenNonce          // the same, in the order accepted
	}
}

type seenNonce struct {
	nonce string
	until time.Time
}

// NewVerifier returns the Verifier of the instance self under keys that keeps up to max
// nonces (0: NoncesMaxDefault).
func NewVerifier(keys *tokens.Keyring, self string, max int) *Verifier {
	v := &Verifier{keys: keys, self: self, max: cmp.Or(max, NoncesMaxDefault)}
	v.mu.seen = map[string]time.Time{}
	return v
}

// Verify checks a request marked forwarded (f.From not empty) at now: method and uri as
// received (path and query), body its whole body. It returns the caller's identity the
// request carries (ok false: none, as with OPSQ_AUTH=off), or an error wrapping
// ErrForwardedSignature that says what is wrong. A request it accepts once, it refuses
// after. f.Digest, when set, must be body's.
func (v *Verifier) Verify(method, uri string, f Forwarded, body []byte, now time.Time) (id identity.Caller, ok bool, err error) {
	d := Digest(body)
	if f.Digest != "" && f.Digest != d {
		return id, false, fmt.Errorf("%w: the body is not the one its digest header names", ErrForwardedSignature)
	}
	f.Digest = d
	return v.VerifyHead(method, uri, f, now)
}

// VerifyHead is Verify before the body is read: the signature covers f.Digest (the
// digest header, required), and the caller reads the body afterwards and checks it
// against f.Digest (BodyMatches). A request that is not an instance's is refused on its
// headers, before a byte of its body is read (issue 31, finding 7).
func (v *Verifier) VerifyHead(method, uri string, f Forwarded, now time.Time) (id identity.Caller, ok bool, err error) {
	fail := func(why string) error { return fmt.Errorf("%w: %s", ErrForwardedSignature, why) }
	sig := f.Signature
	if sig == "" {
		return id, false, fail("no " + opsqtype.ForwardedSignatureHeader + " header")
	}
	if len(sig) > maxSignatureHeader {
		return id, false, fail("the signature header is too long")
	}
	fields := strings.Fields(sig)
	if len(fields) == 5 && fields[0] == "v2" {
		return id, false, fail("a v2 signature, which does not name its destination: the forwarding instance runs an older version; forwards between versions are refused until the upgrade ends")
	}
	if len(fields) != 5 || fields[0] != "v3" {
		return id, false, fail(`the signature header is not "v3 key=… at=… nonce=… mac=…"`)
	}
	if d, err := hex.DecodeString(f.Digest); err != nil || len(d) != sha256.Size || f.Digest != strings.ToLower(f.Digest) {
		return id, false, fail("no " + opsqtype.ForwardedDigestHeader + " header of the body's SHA-256 in lower-case hex")
	}
	if f.To != v.self {
		return id, false, fail(fmt.Sprintf("signed for the instance %q, not this one (%q)", f.To, v.self))
	}
	var keyID int
	var at int64
	var nonce string
	var mac []byte
	for i, name := range []string{"key", "at", "nonce", "mac"} {
		val, ok := strings.CutPrefix(fields[i+1], name+"=")
		if !ok {
			return id, false, fail(`the signature header is not "v3 key=… at=… nonce=… mac=…"`)
		}
		var err error
		switch name {
		case "key":
			keyID, err = strconv.Atoi(val)
		case "at":
			at, err = strconv.ParseInt(val, 10, 64)
		case "nonce":
			var b []byte
			if b, err = base64.RawURLEncoding.Strict().DecodeString(val); err == nil && len(b) != nonceLen {
				err = fmt.Errorf("%d bytes; want %d", len(b), nonceLen)
			}
			nonce = val
		case "mac":
			mac, err = base64.RawURLEncoding.Strict().DecodeString(val) // Strict: one MAC, one spelling
		}
		if err != nil {
			return id, false, fail(fmt.Sprintf("%s: %v", name, err))
		}
	}
	signed := time.UnixMilli(at)
	if d := now.Sub(signed); d > ForwardedMaxAge || d < -ForwardedMaxAge {
		return id, false, fail(fmt.Sprintf("signed %s from this instance's clock, more than %s", d.Round(time.Millisecond), ForwardedMaxAge))
	}
	if !v.keys.Verify(keyID, forwardedMessage(keyID, at, nonce, method, uri, f), mac) {
		return id, false, fail("the signature does not verify under the cluster keys")
	}
	id, ok, err = decodeCaller(f.Caller)
	if err != nil {
		return id, false, fail(err.Error())
	}
	// Kept until the signature could not verify anyway, by this instance's clock.
	if err := v.use(nonce, now, signed.Add(ForwardedMaxAge)); err != nil {
		return identity.Caller{}, false, fail(err.Error())
	}
	return id, ok, nil
}

// use records nonce as used until until, or fails if it was used already or the nonces
// kept are at their bound.
func (v *Verifier) use(nonce string, now, until time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	// Forget the nonces whose signatures are too old now (accepted in about the order of
	// their signing times; one out of order is kept a little longer, never forgotten early).
	drop := 0
	for drop < len(v.mu.order) && now.After(v.mu.order[drop].until) {
		if v.mu.seen[v.mu.order[drop].nonce] == v.mu.order[drop].until {
			delete(v.mu.seen, v.mu.order[drop].nonce)
		}
		drop++
	}
	if drop > 0 {
		v.mu.order = append(v.mu.order[:0], v.mu.order[drop:]...)
	}
	if _, seen := v.mu.seen[nonce]; seen {
		return errors.New("this signature was used already (a replay)")
	}
	if len(v.mu.seen) >= v.max {
		return fmt.Errorf("%d forwarded requests in the last %s, the most kept", v.max, ForwardedMaxAge)
	}
	v.mu.seen[nonce] = until
	v.mu.order = append(v.mu.order, seenNonce{nonce, until})
	return nil
}

// SigningTransport returns a RoundTripper that marks every request it sends as forwarded
// by the instance from and signs it with keys, with a fresh nonce, for the instance its
// opsqtype.ForwardedToHeader names (for the peer client, and for tests that ask one
// instance for its own shards only; a request that names none is refused by every
// instance). A request whose context
// carries a caller's identity (queuer/identity) carries it, signed, in place of any
// Authorization header, and one in a traced request's span carries its traceparent. It reads a request's body to sign it; the bodies forwarded are
// small, bounded by the API's body limit.
func SigningTransport(keys *tokens.Keyring, from string, base http.RoundTripper) http.RoundTripper {
	return &signingTransport{keys: keys, from: from, base: base}
}

type signingTransport struct {
	keys *tokens.Keyring
	from string
	base http.RoundTripper
}

func (t *signingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the body of a forwarded request to sign it: %w", err)
		}
	}
	out := req.Clone(req.Context()) // a RoundTripper must not change the request it is given
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	f := Forwarded{From: t.from, To: req.Header.Get(opsqtype.ForwardedToHeader)}
	if id, ok := identity.From(req.Context()); ok {
		f.Caller = encodeCaller(id)
		// The caller's identity goes, under the signature; its key stays here.
		out.Header.Del("Authorization")
	}
	out.Header.Set(opsqtype.ForwardedHeader, f.From)
	if f.Caller != "" {
		out.Header.Set(opsqtype.ForwardedCallerHeader, f.Caller)
	}
	// The trace of the request forwarded goes on at the peer (tracing on only: with it off,
	// no context carries a span).
	if sc := trace.SpanContextFromContext(req.Context()); sc.IsValid() {
		propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(out.Header))
	}
	out.Header.Set(opsqtype.ForwardedDigestHeader, Digest(body))
	out.Header.Set(opsqtype.ForwardedSignatureHeader, signForwarded(t.keys, out.Method, out.URL.RequestURI(), f, body, time.Now(), newNonce()))
	return t.base.RoundTrip(out)
}
