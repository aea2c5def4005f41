//go:build !linux

package clustertest

import (
	"fmt"
	"net"
)

// HoldPort chooses a loopback port that was free a moment ago. It does not hold it: with
// BSD semantics a socket bound with SO_REUSEADDR keeps others (opsq's listener included)
// from binding the same address.
func HoldPort() (*Port, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return &Port{Num: l.Addr().(*net.TCPAddr).Port, fd: -1}, nil
}
