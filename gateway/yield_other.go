//go:build !linux

package gateway

// yieldThread does nothing where sched_yield(2) is not wired up; see the
// Linux version.
func yieldThread() {}
