package bench

import "syscall"

// childProcAttr puts an instance in its own process group, so that Ctrl-C reaches only the
// bench, which stops the instances itself, and has the kernel stop it if the bench dies.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
