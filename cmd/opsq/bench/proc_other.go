//go:build !linux

package bench

import "syscall"

// childProcAttr puts an instance in its own process group, so that Ctrl-C reaches only the
// bench, which stops the instances itself.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
