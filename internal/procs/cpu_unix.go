//go:build unix

package procs

import (
	"syscall"
	"time"
)

// processCPU returns the process's user and system CPU time so far
// (getrusage(2), RUSAGE_SELF).
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
