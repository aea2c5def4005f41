//go:build !unix

package api

import "net"

// peerClosed cannot peek without blocking here: the request's context alone tells.
func peerClosed(net.Conn) bool { return false }
