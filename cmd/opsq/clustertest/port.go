package clustertest

import (
	"net"
	"strconv"
	"sync"
	"syscall"
)

// Port is a loopback TCP port held for one instance for as long as the kit needs it: a
// socket bound to it with SO_REUSEADDR that never listens. While it is held, the kernel
// gives the port to no bind of port 0 and to no outgoing connection, so no other test's
// server or client can take it between the moment it is chosen and the moment the
// instance listens, nor after the instance was killed (connecting then is refused rather
// than answered by someone else). The instance can still listen on it: Go's listeners set
// SO_REUSEADDR too, and Linux lets such sockets share a port as long as only one listens.
// Close releases it. Safe for concurrent use. Elsewhere (BSD semantics differ) the port
// is only chosen free, not held: see port_other.go.
type Port struct {
	Num int // the port number

	once sync.Once
	fd   int // -1 when not held
}

// Addr is the port's address, "127.0.0.1:N".
func (p *Port) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Num)) }

// Close releases the port; safe twice.
func (p *Port) Close() {
	p.once.Do(func() {
		if p.fd >= 0 {
			syscall.Close(p.fd)
		}
	})
}
