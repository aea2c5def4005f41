package clustertest

import "syscall"

// childProcAttr has the kernel kill a child if the process that started it dies, so that
// no instance outlives a test binary or a bench that crashed.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
