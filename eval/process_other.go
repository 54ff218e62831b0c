//go:build !unix

package eval

import "os/exec"

// inOwnGroup leaves cmd as it is: without Unix process groups only the
// command's own process is killed at its timeout.
func inOwnGroup(cmd *exec.Cmd) {}

// killGroup does nothing without Unix process groups.
func killGroup(pgid int) error { return nil }
