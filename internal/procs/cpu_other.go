//go:build !unix

package procs

import "time"

// processCPU reports that the CPU time is not read here: Run then leaves
// the Ps as they are.
func processCPU() (time.Duration, bool) { return 0, false }
