//go:build !unix

package storetest

import "time"

// processCPU cannot read the process's CPU time on this platform.
func processCPU() (time.Duration, bool) { return 0, false }
