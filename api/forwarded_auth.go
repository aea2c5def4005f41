package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/api/wire"
	"opsq/queuer"
	"opsq/queuer/identity"
)

// Requests between instances (DESIGN.md §8, "Between instances"). An instance forwards a
// reserve or an extend with the caller's identity (its key's name and role) under the
// cluster key's signature, never the caller's key: the receiving instance checks the
// signature (once: queuer/internal/peers keeps the nonces it accepted) and serves the request for
// that identity. A request marked forwarded that carries a key as well (a test's
// instance-local client) is checked by its key, and its signature by the handler.

// MaxForwardedBodyBytes bounds the body of a request marked forwarded that carries no key:
// the largest an instance forwards is an extend or a give-back of wire.MaxRequestItems
// tokens (about 770 KB). It is read only once the signature has verified.
const MaxForwardedBodyBytes = 1 << 20

// forwardedVerifiedKey is where forwardedCaller notes, in the echo context, that the
// request's signature was checked (and its nonce used): the handler does not check it again.
const forwardedVerifiedKey = "opsq.forwarded_verified"

// forwardable reports whether an instance forwards requests of that method and route.
func forwardable(method, path string) bool {
	return method == http.MethodPost && (path == "/v1/reserve" || path == "/v1/extend" || path == queuer.GiveBackPath)
}

// forwardedCaller authenticates a request another instance forwarded here without a key:
// handled reports whether the request is one (marked forwarded, no Authorization, a
// reserve or an extend), and then err is why it is refused, or nil when its signature
// verifies and the identity it carries has a role of allowed.
func (s *server) forwardedCaller(c echo.Context, allowed []apikeys.Role) (handled bool, err error) {
	req := c.Request()
	if req.Header.Get(wire.ForwardedHeader) == "" || req.Header.Get(echo.HeaderAuthorization) != "" || !forwardable(req.Method, c.Path()) {
		return false, nil
	}
	// Nothing of its body is read before its signature verifies: the signature covers the
	// body's digest, sent in a header (queuer/internal/peers/forwardsig.go), so a request
	// that is not an instance's is refused on its headers, and its connection closed
	// rather than drained (issue 31, finding 7: bodies of forged forwarded requests used
	// to be read, up to 1 MiB each, before anything said who sent them).
	refuse := func(err error) (bool, error) {
		if b := idleBodyOf(c); b != nil {
			if e, ok := err.(*Error); ok {
				b.cut(e)
			}
		}
		return true, err
	}
	if req.ContentLength > MaxForwardedBodyBytes {
		return refuse(tooLarge("body: %d bytes; a forwarded request's body is at most %d", req.ContentLength, MaxForwardedBodyBytes))
	}
	f := forwardedHeaders(req)
	id, ok, err := s.q.VerifyForwardedHead(req.Method, req.RequestURI, f)
	switch {
	case err != nil:
		return refuse(s.authFails.failed(c, "", "forwarded request: "+err.Error(), forwardedRefusal(err)))
	case !ok:
		return refuse(s.authFails.failed(c, "", "forwarded request without a caller", unauthorized(c,
			"a forwarded request carries no caller: the forwarding instance serves without keys (OPSQ_AUTH=off) while this one requires them")))
	}
	role := apikeys.Role(id.Role)
	if !slices.Contains(allowed, role) {
		return refuse(&Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
			"the key %q has the role %s, which may not call %s %s (allowed: %s)", id.Name, role, req.Method, c.Path(), joinRoles(allowed))})
	}
	// Signed by an instance: its body is read, counted in the budget as any body, and must
	// be the one the signature names.
	raw, err := readForwarded(c)
	if err != nil {
		return true, err
	}
	if queuer.ForwardedDigest(raw) != f.Digest {
		return true, s.authFails.failed(c, "", "forwarded request: its body is not the one signed", &Error{Status: http.StatusUnauthorized,
			Code: "forwarded_signature", Message: "the body is not the one the " + wire.ForwardedDigestHeader + " header names, which the signature covers"})
	}
	req.Body = io.NopCloser(bytes.NewReader(raw)) // the handler reads it again
	// The tenants travel with the identity: a consumer limited to some tenants stays so on
	// the instance its reserve is forwarded to.
	k := apikeys.Caller{Name: id.Name, Role: role, Tenant: id.Tenant}
	if id.Limited {
		k.Tenants = append([]string{}, id.Tenants...) // non-nil: limited, to none if empty
	}
	if err := holdOf(c).growTo(req.Context(), jsonBodyFactor*int64(len(raw))); err != nil {
		return true, err
	}
	c.Set(callerKey, k)
	c.Set(forwardedVerifiedKey, true)
	c.SetRequest(req.WithContext(identity.With(req.Context(), id)))
	return true, nil
}

// forwardedHeaders are the forwarding headers of r.
func forwardedHeaders(r *http.Request) queuer.Forwarded {
	return queuer.Forwarded{From: r.Header.Get(wire.ForwardedHeader), Signature: r.Header.Get(wire.ForwardedSignatureHeader),
		Caller: r.Header.Get(wire.ForwardedCallerHeader), To: r.Header.Get(wire.ForwardedToHeader),
		Digest: r.Header.Get(wire.ForwardedDigestHeader)}
}

// forwardedRefusal is the 401 of a forwarded request whose signature does not verify.
func forwardedRefusal(err error) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "forwarded_signature",
		Message: fmt.Sprintf("%v: only an instance of this cluster may forward a request; a client leaves the %s header out", err, wire.ForwardedHeader)}
}

// verifyForwarded checks the signature of c's request, marked forwarded, whose body is
// body, and returns the caller it carries (ok false: none); a refusal is a 401
// forwarded_signature.
func (s *server) verifyForwarded(c echo.Context, body []byte) (id identity.Caller, ok bool, err error) {
	r := c.Request()
	id, ok, err = s.q.VerifyForwarded(r.Method, r.RequestURI, forwardedHeaders(r), body)
	if err != nil {
		return id, false, forwardedRefusal(err)
	}
	return id, ok, nil
}

// readForwarded reads the body of a keyless forwarded request whose signature verified, at
// most MaxForwardedBodyBytes, counted in the memory budget as it comes (budget.middleware).
func readForwarded(c echo.Context) ([]byte, error) {
	r := c.Request()
	// Past the bound nothing more of it is read, not even to drain it: the connection closes.
	refuse := func(err *Error) ([]byte, error) {
		if b := idleBodyOf(c); b != nil {
			b.cut(err)
		}
		return nil, err
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, MaxForwardedBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(buf) > MaxForwardedBodyBytes {
		return refuse(tooLarge("body: a forwarded request's body is at most %d bytes", MaxForwardedBodyBytes))
	}
	return buf, nil
}
