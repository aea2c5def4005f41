//go:build unix

package api

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed peeks at c's socket without blocking: 0 bytes is the end of the stream (the
// client closed), an error other than "nothing yet" a reset. Control, not Read: it does not
// wait for the read lock that net/http's background read of the connection holds.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			closed = true // ECONNRESET and the like
		}
	})
	return closed
}
