// Package procs sets how many Ps (GOMAXPROCS) a latency-bound server runs
// with, from its own CPU use: one while the process is lightly loaded, all
// of them once it uses more than about three quarters of a core, and one
// again after it has used under half a core for a while (see Run).
//
// Why: a gateway's request path readies goroutines (net/http's background
// read of each request, timers, the store's writer), and with an idle P the
// Go runtime wakes a second thread for each one, which spins looking for
// work before it sleeps again. On a host of few cores that also runs the
// agent and the upstream, those wakes take CPU from them at the moments
// each call waits on them: in bench/gateway (two cores, sequential calls)
// belay with one P added 0.06–0.12× less of the bare proxy's latency than
// with two, and used 0.39 cores for the calls that took 0.45. One P caps
// the process at about one core, so under load it gets them all back.
package procs

import (
	"context"
	"runtime"
	"time"
)

// Defaults of Options.
const (
	// DefaultTick is how often the process's CPU use is read.
	DefaultTick = 50 * time.Millisecond
	// DefaultUpAt is the CPU use, in cores, over one tick at which one P
	// is raised to all of them: the one P is busy most of the time.
	DefaultUpAt = 0.75
	// DefaultDownAt is the CPU use, in cores, under which all the Ps go
	// back to one once it has lasted DefaultDownAfter. It is lower than
	// DefaultUpAt so that a load between them does not flip the setting
	// at every tick, and it counts the spinning of idle threads that more
	// Ps add (bench/gateway's sequential calls used 0.45 cores with two Ps
	// and 0.39 with one).
	DefaultDownAt = 0.5
	// DefaultDownAfter is how long the use stays under DefaultDownAt
	// before the Ps go back to one.
	DefaultDownAfter = 2 * time.Second
)

// Options configure Run. Zero fields take the defaults.
type Options struct {
	// Max is the number of Ps under load. Default: the runtime's own
	// choice (from the CPUs, the CPU affinity and the cgroup's limit),
	// which Run hands back to the runtime (runtime.SetDefaultGOMAXPROCS)
	// each time it raises the Ps and when it returns, so that the
	// runtime's own updates of it go on.
	Max int
	// Tick, UpAt, DownAt, DownAfter: see the Default constants. A DownAt
	// not below UpAt is lowered to UpAt × DefaultDownAt/DefaultUpAt.
	Tick      time.Duration
	UpAt      float64
	DownAt    float64
	DownAfter time.Duration
	// CPU returns the CPU time the process has used so far (default: the
	// getrusage(2) user and system time; where there is none, Run returns
	// at once).
	CPU func() (time.Duration, bool)
	// Set sets the number of Ps (default runtime.GOMAXPROCS; see Max).
	Set func(n int)
	// OnChange, when set, is told each change with the CPU use that made
	// it, in cores.
	OnChange func(procs int, load float64)
}

// Run sets the Ps to one, then adapts them to the process's CPU use until
// ctx ends; it then sets them back to Max and returns. It does nothing
// (and returns at once) when Max is 1, when the CPU time cannot be read or
// when ctx has ended. A read of the CPU time that fails later raises the
// Ps to Max (the load is then unknown: one P would cap the process at
// about one core) until reads work again. One Run per process: two would
// fight over the setting. Run sets GOMAXPROCS only from its own goroutine.
func Run(ctx context.Context, o Options) {
	auto := o.Max <= 0 && o.Set == nil
	if o.Max <= 0 {
		o.Max = runtime.GOMAXPROCS(0)
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.UpAt <= 0 {
		o.UpAt = DefaultUpAt
	}
	if o.DownAt <= 0 {
		o.DownAt = DefaultDownAt
	}
	if o.DownAt >= o.UpAt {
		o.DownAt = o.UpAt * DefaultDownAt / DefaultUpAt
	}
	if o.DownAfter <= 0 {
		o.DownAfter = DefaultDownAfter
	}
	if o.CPU == nil {
		o.CPU = processCPU
	}
	if o.Set == nil {
		o.Set = func(n int) { runtime.GOMAXPROCS(n) }
	}
	raise := func() int { o.Set(o.Max); return o.Max }
	if auto {
		raise = func() int { runtime.SetDefaultGOMAXPROCS(); return runtime.GOMAXPROCS(0) }
	}
	lastCPU, ok := o.CPU()
	if o.Max <= 1 || !ok || ctx.Err() != nil {
		return
	}
	note := func(n int, load float64) {
		if o.OnChange != nil {
			o.OnChange(n, load)
		}
	}
	high := false
	up := func(load float64) {
		high = true
		note(raise(), load)
	}
	o.Set(1)
	note(1, 0)
	defer func() {
		if !high {
			up(0)
		}
	}()
	tick := time.NewTicker(o.Tick)
	defer tick.Stop()
	last := time.Now()
	var low time.Duration // how long the use has stayed under DownAt
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			used, ok := o.CPU()
			now := time.Now()
			if !ok {
				if !high { // blind: not kept at one core
					up(0)
				}
				continue
			}
			elapsed := now.Sub(last)
			if elapsed <= 0 {
				continue
			}
			load := float64(used-lastCPU) / float64(elapsed)
			lastCPU, last = used, now
			switch {
			case !high && load > o.UpAt:
				low = 0
				up(load)
			case high && load < o.DownAt:
				if low += elapsed; low >= o.DownAfter {
					high, low = false, 0
					o.Set(1)
					note(1, load)
				}
			case high:
				low = 0
			}
		}
	}
}
