//go:build !linux

package clustertest

import "syscall"

// childProcAttr is empty where the kernel cannot kill a child when its parent dies.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
