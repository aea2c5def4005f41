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

// Defaults and bounds of the bodies of keyless forwarded requests.
const (
	// MaxUnverifiedBytesDefault is the default of Config.MaxUnverifiedBytes
	// (OPSQ_MAX_UNVERIFIED_BYTES).
	MaxUnverifiedBytesDefault = 16 << 20
	// MaxForwardedBodyBytes bounds the body of a request marked forwarded that carries no
	// key: the largest an instance forwards is an extend or a give-back of
	// wire.MaxRequestItems tokens (about 770 KB).
	MaxForwardedBodyBytes = 1 << 20
)

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
	// Its body is read before anything says who sent it, so it is held apart: in the
	// bytes for unverified bodies (Config.MaxUnverifiedBytes), never in the memory budget
	// the clients' requests share, and at most MaxForwardedBodyBytes of it.
	unverified := &hold{b: s.unverified}
	defer unverified.free()
	raw, err := readUnverified(c, unverified)
	if err != nil {
		return true, err
	}
	req.Body = io.NopCloser(bytes.NewReader(raw)) // the handler reads it again
	id, ok, err := s.verifyForwarded(c, raw)
	switch {
	case err != nil:
		return true, s.authFails.failed(c, "", "forwarded request: "+err.Error(), err)
	case !ok:
		return true, s.authFails.failed(c, "", "forwarded request without a caller", unauthorized(c,
			"a forwarded request carries no caller: the forwarding instance serves without keys (OPSQ_AUTH=off) while this one requires them"))
	}
	role := apikeys.Role(id.Role)
	if !slices.Contains(allowed, role) {
		return true, &Error{Status: http.StatusForbidden, Code: "forbidden", Message: fmt.Sprintf(
			"the key %q has the role %s, which may not call %s %s (allowed: %s)", id.Name, role, req.Method, c.Path(), joinRoles(allowed))}
	}
	// The tenants travel with the identity: a consumer limited to some tenants stays so on
	// the instance its reserve is forwarded to.
	k := apikeys.Caller{Name: id.Name, Role: role, Tenant: id.Tenant}
	if id.Limited {
		k.Tenants = append([]string{}, id.Tenants...) // non-nil: limited, to none if empty
	}
	// Verified: the body is the caller's, counted in the budget as any body as decoded.
	if err := holdOf(c).growTo(req.Context(), jsonBodyFactor*int64(len(raw))); err != nil {
		return true, err
	}
	c.Set(callerKey, k)
	c.Set(forwardedVerifiedKey, true)
	c.SetRequest(req.WithContext(identity.With(req.Context(), id)))
	return true, nil
}

// verifyForwarded checks the signature of c's request, marked forwarded, whose body is
// body, and returns the caller it carries (ok false: none); a refusal is a 401
// forwarded_signature.
func (s *server) verifyForwarded(c echo.Context, body []byte) (id identity.Caller, ok bool, err error) {
	r := c.Request()
	f := queuer.Forwarded{From: r.Header.Get(wire.ForwardedHeader), Signature: r.Header.Get(wire.ForwardedSignatureHeader),
		Caller: r.Header.Get(wire.ForwardedCallerHeader), To: r.Header.Get(wire.ForwardedToHeader)}
	id, ok, err = s.q.VerifyForwarded(r.Method, r.RequestURI, f, body)
	if err != nil {
		return id, false, &Error{Status: http.StatusUnauthorized, Code: "forwarded_signature",
			Message: fmt.Sprintf("%v: only an instance of this cluster may forward a request; a client leaves the %s header out", err, wire.ForwardedHeader)}
	}
	return id, ok, nil
}

// readUnverified reads the body of a keyless forwarded request into h, at most
// MaxForwardedBodyBytes, counting each byte as it comes: a client holds only what it sent.
// It reads below the memory budget's count (budget.middleware), as the bytes are h's.
func readUnverified(c echo.Context, h *hold) ([]byte, error) {
	r := c.Request()
	// Past the bound nothing more of it is read, not even to drain it: the connection closes.
	refuse := func(err *Error) ([]byte, error) {
		if b := idleBodyOf(c); b != nil {
			b.cut(err)
		}
		return nil, err
	}
	if r.ContentLength > MaxForwardedBodyBytes {
		return refuse(tooLarge("body: %d bytes; a forwarded request's body is at most %d", r.ContentLength, MaxForwardedBodyBytes))
	}
	var body io.Reader = r.Body
	if b, ok := r.Body.(*budgetBody); ok {
		body = b.ReadCloser
	}
	body = io.LimitReader(body, MaxForwardedBodyBytes+1)
	var buf []byte
	piece := make([]byte, 16<<10)
	for {
		n, err := body.Read(piece)
		if n > 0 {
			if gerr := h.growTo(r.Context(), int64(len(buf)+n)); gerr != nil {
				return nil, gerr
			}
			buf = append(buf, piece[:n]...)
		}
		if len(buf) > MaxForwardedBodyBytes {
			return refuse(tooLarge("body: a forwarded request's body is at most %d bytes", MaxForwardedBodyBytes))
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
