package procs

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCPU is a process whose CPU use the test sets, in cores; its time
// runs on synctest's clock.
type fakeCPU struct {
	mu    sync.Mutex
	used  time.Duration
	cores float64
	at    time.Time
}

func (f *fakeCPU) read() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.used += time.Duration(f.cores * float64(now.Sub(f.at)))
	f.at = now
	return f.used, true
}

func (f *fakeCPU) use(cores float64) {
	f.read() // what was used so far, at the old rate
	f.mu.Lock()
	f.cores = cores
	f.mu.Unlock()
}

// change is one setting of the Ps, at a time since the start.
type change struct {
	procs int
	at    time.Duration
}

// run starts Run over cpu with Max 4 and returns the changes seen so far
// and a stop that ends Run and returns all of them.
func run(t *testing.T, cpu *fakeCPU) (seen func() []change, stop func() []change) {
	t.Helper()
	start := time.Now()
	cpu.at = start
	var mu sync.Mutex
	var changes []change
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, Options{Max: 4, CPU: cpu.read, Set: func(n int) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, change{n, time.Since(start)})
		}})
	}()
	seen = func() []change {
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		return append([]change(nil), changes...)
	}
	stop = func() []change {
		cancel()
		<-done
		return seen()
	}
	return seen, stop
}

func equal(a, b []change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// One P at the start; all four within a tick of the use passing 0.75
// cores; back to one only after 2 s under 0.5; all four again when Run
// ends.
func TestPsFollowTheLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cpu := &fakeCPU{cores: 0.3}
		seen, stop := run(t, cpu)
		if got, want := seen(), []change{{1, 0}}; !equal(got, want) {
			t.Fatalf("at the start: %v, want %v", got, want)
		}
		time.Sleep(time.Second) // 0.3 cores: stays at one
		cpu.use(0.9)
		time.Sleep(100 * time.Millisecond)
		want := []change{{1, 0}, {4, 1050 * time.Millisecond}}
		if got := seen(); !equal(got, want) {
			t.Fatalf("after the load rose: %v, want %v", got, want)
		}
		cpu.use(0.6) // between the thresholds: stays at four
		time.Sleep(5 * time.Second)
		if got := seen(); !equal(got, want) {
			t.Fatalf("at 0.6 cores: %v, want %v", got, want)
		}
		cpu.use(0.4) // under 0.5 from 6.1 s: one again at 8.1 s
		time.Sleep(1900 * time.Millisecond)
		if got := seen(); !equal(got, want) {
			t.Fatalf("1.9 s under 0.5: %v, want %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
		want = append(want, change{1, 8100 * time.Millisecond})
		if got := seen(); !equal(got, want) {
			t.Fatalf("2 s under 0.5: %v, want %v", got, want)
		}
		want = append(want, change{4, 8200 * time.Millisecond})
		if got := stop(); !equal(got, want) {
			t.Fatalf("after Run: %v, want %v", got, want)
		}
	})
}

// A tick over DownAt restarts the 2 s.
func TestABusyTickRestartsTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cpu := &fakeCPU{cores: 1}
		seen, stop := run(t, cpu)
		time.Sleep(75 * time.Millisecond) // the first tick, at 50 ms, raised it
		cpu.use(0.2)
		time.Sleep(1500 * time.Millisecond)
		cpu.use(0.9) // one tick's worth
		time.Sleep(50 * time.Millisecond)
		cpu.use(0.2)
		time.Sleep(1900 * time.Millisecond)
		want := []change{{1, 0}, {4, 50 * time.Millisecond}}
		if got := seen(); !equal(got, want) {
			t.Fatalf("%v, want %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
		stop()
		got := seen()
		if len(got) != 4 || got[2].procs != 1 || got[2].at < 3600*time.Millisecond || got[2].at > 3700*time.Millisecond {
			t.Fatalf("%v: want one P again 2 s after the last busy tick (3.6–3.7 s)", got)
		}
	})
}

// Nothing is set where the CPU time cannot be read, or with one CPU.
func TestNothingToAdapt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, o := range []Options{
			{Max: 4, CPU: func() (time.Duration, bool) { return 0, false }},
			{Max: 1, CPU: (&fakeCPU{}).read},
		} {
			set := 0
			o.Set = func(int) { set++ }
			Run(t.Context(), o) // returns at once
			if set != 0 {
				t.Errorf("Max %d: set %d times, want 0", o.Max, set)
			}
		}
	})
}

// The real CPU time is read and grows.
func TestProcessCPU(t *testing.T) {
	a, ok := processCPU()
	if !ok {
		t.Skip("getrusage(2) is not read on this system")
	}
	x := 0
	for i := range 20_000_000 {
		x += i % 7
	}
	b, _ := processCPU()
	if b <= a {
		t.Fatalf("CPU time %v then %v after a busy loop (%d), want it to grow", a, b, x)
	}
}

// A DownAt not below UpAt would lower the Ps at a load that raises them
// again at the next tick: it is lowered under UpAt.
func TestDownAtBelowUpAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cpu := &fakeCPU{cores: 0.6, at: time.Now()}
		var mu sync.Mutex
		var sets []int
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, Options{Max: 4, UpAt: 0.5, DownAt: 0.8, CPU: cpu.read, Set: func(n int) {
				mu.Lock()
				defer mu.Unlock()
				sets = append(sets, n)
			}})
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		mu.Lock()
		got := append([]int(nil), sets...)
		mu.Unlock()
		cancel()
		<-done
		if len(got) != 2 || got[0] != 1 || got[1] != 4 {
			t.Fatalf("sets %v over 10 s at 0.6 cores with UpAt 0.5, DownAt 0.8: want [1 4], raised once and kept", got)
		}
	})
}
