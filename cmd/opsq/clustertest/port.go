package clustertest

import (
	"fmt"
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
// Close releases it. Safe for concurrent use.
type Port struct {
	Num int // the port number

	once sync.Once
	fd   int
}

// HoldPort binds a fresh loopback port and holds it.
func HoldPort() (*Port, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, fmt.Errorf("holding a port: making a socket: %w", err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("holding a port: setting SO_REUSEADDR: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("holding a port: binding a loopback port: %w", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("holding a port: reading its number: %w", err)
	}
	return &Port{Num: sa.(*syscall.SockaddrInet4).Port, fd: fd}, nil
}

// Addr is the port's address, "127.0.0.1:N".
func (p *Port) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Num)) }

// Close releases the port; safe twice.
func (p *Port) Close() {
	p.once.Do(func() { syscall.Close(p.fd) })
}
