//go:build linux

package clustertest

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestPortHeld: an instance can listen on a held port; once its listener is gone,
// connecting is refused; and until Close the port is taken for any bind that does not
// share it as an instance does (with SO_REUSEADDR), which the kernel's choice of a port 0
// bind or of an outgoing connection's port never does.
func TestPortHeld(t *testing.T) {
	t.Parallel()
	p, err := HoldPort()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	ln, err := net.Listen("tcp", p.Addr())
	if err != nil {
		t.Fatalf("listening on the held port %s, as an instance does: %v", p.Addr(), err)
	}
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("connecting to the listener on the held port: %v", err)
	}
	conn.Close()
	ln.Close()
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connecting to the held port after its listener closed: %v; want connection refused", err)
	}

	if err := plainBind(p.Num); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("binding the held port %d without SO_REUSEADDR: %v; want address in use", p.Num, err)
	}
	p.Close()
	p.Close() // safe twice
	if err := plainBind(p.Num); err != nil {
		t.Errorf("binding port %d after Close: %v; want it free", p.Num, err)
	}
}

// plainBind binds a socket without SO_REUSEADDR to a loopback port, and closes it.
func plainBind(port int) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}
