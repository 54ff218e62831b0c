//go:build unix

package eval

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// inOwnGroup makes cmd the leader of a new process group (setpgid) and
// makes the cancellation of its context kill the whole group with SIGKILL,
// so a shell's children die with it.
func inOwnGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
}

// killGroup sends SIGKILL to process group pgid; os.ErrProcessDone when
// the group has no process left. POSIX does not reuse a process group id
// while any process of the group lives, so a reaped leader's id still
// names its leftovers only.
func killGroup(pgid int) error {
	err := syscall.Kill(-pgid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}
