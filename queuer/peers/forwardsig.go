package peers

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"opsq/api/wire"
	"opsq/queuer/tokens"
)

// Requests one instance forwards to another (reserves and extends) are signed with the
// cluster key (DESIGN.md §8, "Between instances"): the signature covers the method, the
// path and query, a digest of the body, the time of sending and the forwarding instance's
// id, and is sent in wire.ForwardedSignatureHeader as
//
//	v1 key=<cluster key id> at=<unix milliseconds> mac=<base64url of the MAC>
//
// An instance acts on a request marked forwarded only when its signature verifies under a
// cluster key it holds and it was made less than ForwardedMaxAge ago (or ahead, for clocks
// that disagree): a copy replayed later, or one made without the key, is refused.

// ForwardedMaxAge is how far from this instance's clock a forwarded request's signing
// time may be.
const ForwardedMaxAge = 30 * time.Second

// maxSignatureHeader bounds the signature header read: a real one is about 60 bytes.
const maxSignatureHeader = 200

// ErrForwardedSignature is returned by VerifyForwarded for a request marked forwarded
// whose signature is missing, malformed, stale or wrong.
var ErrForwardedSignature = errors.New("a request marked forwarded by another instance has no valid signature")

// forwardedMessage is what a forwarded request's MAC covers.
func forwardedMessage(keyID int, at int64, method, uri, from string, body []byte) []byte {
	digest := sha256.Sum256(body)
	return fmt.Appendf(nil, "opsq forwarded v1\n%d\n%d\n%s\n%s\n%s\n%s", keyID, at, method, uri, from, hex.EncodeToString(digest[:]))
}

// signForwarded returns the signature header of a forwarded request sent at now.
func signForwarded(k *tokens.Keyring, method, uri, from string, body []byte, now time.Time) string {
	at := now.UnixMilli()
	keyID, mac := k.Sign(func(keyID int) []byte { return forwardedMessage(keyID, at, method, uri, from, body) })
	return fmt.Sprintf("v1 key=%d at=%d mac=%s", keyID, at, base64.RawURLEncoding.EncodeToString(mac))
}

// VerifyForwarded checks the signature of a request marked forwarded by the instance from
// (the value of wire.ForwardedHeader): method and uri as received (path and query),
// body its whole body, sig the value of wire.ForwardedSignatureHeader. It returns nil,
// or an error wrapping ErrForwardedSignature that says what is wrong.
func VerifyForwarded(k *tokens.Keyring, method, uri, from string, body []byte, sig string, now time.Time) error {
	fail := func(why string) error { return fmt.Errorf("%w: %s", ErrForwardedSignature, why) }
	if sig == "" {
		return fail("no " + wire.ForwardedSignatureHeader + " header")
	}
	if len(sig) > maxSignatureHeader {
		return fail("the signature header is too long")
	}
	fields := strings.Fields(sig)
	if len(fields) != 4 || fields[0] != "v1" {
		return fail(`the signature header is not "v1 key=… at=… mac=…"`)
	}
	var keyID int
	var at int64
	var mac []byte
	for i, name := range []string{"key", "at", "mac"} {
		v, ok := strings.CutPrefix(fields[i+1], name+"=")
		if !ok {
			return fail(`the signature header is not "v1 key=… at=… mac=…"`)
		}
		var err error
		switch name {
		case "key":
			keyID, err = strconv.Atoi(v)
		case "at":
			at, err = strconv.ParseInt(v, 10, 64)
		case "mac":
			mac, err = base64.RawURLEncoding.Strict().DecodeString(v) // Strict: one MAC, one spelling
		}
		if err != nil {
			return fail(fmt.Sprintf("%s: %v", name, err))
		}
	}
	if d := now.Sub(time.UnixMilli(at)); d > ForwardedMaxAge || d < -ForwardedMaxAge {
		return fail(fmt.Sprintf("signed %s from this instance's clock, more than %s", d.Round(time.Millisecond), ForwardedMaxAge))
	}
	if !k.Verify(keyID, forwardedMessage(keyID, at, method, uri, from, body), mac) {
		return fail("the signature does not verify under the cluster keys")
	}
	return nil
}

// SigningTransport returns a RoundTripper that marks every request it sends as forwarded
// by the instance from and signs it with keys (for the peer client, and for tests that ask
// one instance for its own shards only). It reads a request's body to sign it; the bodies
// forwarded are small, bounded by the API's body limit.
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
	out.Header.Set(wire.ForwardedHeader, t.from)
	out.Header.Set(wire.ForwardedSignatureHeader, signForwarded(t.keys, out.Method, out.URL.RequestURI(), t.from, body, time.Now()))
	return t.base.RoundTrip(out)
}
