package procs

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// recorder collects the Ps Run sets.
type recorder struct {
	mu   sync.Mutex
	sets []int
}

func (r *recorder) set(n int) { r.mu.Lock(); r.sets = append(r.sets, n); r.mu.Unlock() }
func (r *recorder) get() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sets...)
}

// Once the CPU time cannot be read any more (after a good first read),
// Run raises the Ps: at one P the process would stay capped at about one
// core whatever its load (an adversarial review's finding).
func TestCPUFailingMidRunLeavesOneP_adv21(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cpu := &fakeCPU{cores: 1.5, at: time.Now()} // busy: wants more than one P
		var broken atomic.Bool
		var r recorder
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, Options{Max: 4, CPU: func() (time.Duration, bool) {
				if broken.Swap(true) { // every read after the first fails
					return 0, false
				}
				return cpu.read()
			}, Set: r.set})
		}()
		time.Sleep(10 * time.Second) // 200 ticks at 1.5 cores
		synctest.Wait()
		got := r.get()
		cancel()
		<-done
		if len(got) < 2 || got[len(got)-1] != 4 {
			t.Fatalf("Ps set %v over 10 s at 1.5 cores with the CPU time unreadable after the start: "+
				"stuck at one P; want all 4 back (or Run to stop and restore them)", got)
		}
	})
}

// A ctx that has ended before Run starts: nothing is set (no two
// stop-the-world pauses for nothing).
func TestCanceledBeforeStart_adv21(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		Run(ctx, Options{Max: 3, CPU: (&fakeCPU{at: time.Now()}).read, Set: r.set})
		if got := r.get(); len(got) != 0 {
			t.Fatalf("sets %v, want none", got)
		}
	})
}

// Canceled after the start, before the first tick: one P, then Max
// again, and Run returns.
func TestCanceledBeforeFirstTick_adv21(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r recorder
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, Options{Max: 3, CPU: (&fakeCPU{at: time.Now()}).read, Set: r.set})
		}()
		synctest.Wait()
		cancel()
		<-done
		if got := r.get(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
			t.Fatalf("sets %v, want [1 3]", got)
		}
	})
}

// A read that fails for a while is skipped without losing time: the
// next good read averages over the whole span, and the time under DownAt
// counts it.
func TestTransientFailureAveragesOverTheGap_adv21(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cpu := &fakeCPU{cores: 2, at: time.Now()}
		var fail atomic.Bool
		var r recorder
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, Options{Max: 4, CPU: func() (time.Duration, bool) {
				if fail.Load() {
					return 0, false
				}
				return cpu.read()
			}, Set: r.set})
		}()
		time.Sleep(75 * time.Millisecond) // raised at 50 ms
		cpu.use(0.1)
		fail.Store(true)
		time.Sleep(2500 * time.Millisecond) // no reads succeed
		fail.Store(false)
		time.Sleep(50 * time.Millisecond) // the next good read covers ~2.5 s at 0.1
		synctest.Wait()
		got := r.get()
		cancel()
		<-done
		if len(got) < 3 || got[1] != 4 || got[2] != 1 {
			t.Fatalf("sets %v, want [1 4 1 ...]: down to one at the first good read after 2 s+ under DownAt", got)
		}
	})
}
