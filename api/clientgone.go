package api

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
)

// A reserve that has taken chunks and is about to answer checks that its client is still
// there: one that left (its connection closed) would never read the answer, and the chunks
// would stay reserved until their lease ran out, each then counting an attempt. The
// request's context ends when net/http notices the client leaving, but that takes a
// goroutine being scheduled, and a parked reserve's connection is read by nobody while
// it looks for work. clientGone asks the kernel directly.

// connKey is where ConnContext keeps a request's connection in its context.
type connKey struct{}

// ConnContext is http.Server.ConnContext for the API: it keeps each request's connection in
// its context, so that a reserve can tell whether its client left before it answers.
// Without it, a reserve tells that only from the request's context.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// clientLeft reports whether the client of the request whose context is ctx is gone: the
// context ended, or its connection was closed by the other end.
func clientLeft(r *http.Request) bool {
	if r.Context().Err() != nil {
		return true
	}
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c != nil && connClosed(c)
}

// connClosed reports whether the other end of c closed it or reset it, without reading or
// waiting: a peek at the socket. Bytes waiting to be read (a next request) mean it is open.
func connClosed(c net.Conn) bool {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	return peerClosed(c)
}
