package breaker

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/failure"
)

var (
	errTransient = failure.New(failure.ServerError, "500")
	errDegraded  = failure.New(failure.QuotaExhausted, "quota")
	errPermanent = failure.New(failure.InvalidRequest, "bad request")
	errFatal     = failure.New(failure.Canceled, "canceled")
)

func mustNew(t testing.TB, s Settings) *Breaker {
	t.Helper()
	b, err := New("d1", s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call makes one call through b that ends with err, and reports whether it
// was admitted.
func call(b *Breaker, err error) bool {
	tk, aerr := b.Allow()
	if aerr != nil {
		return false
	}
	tk.Done(err)
	return true
}

type recorder struct {
	mu      sync.Mutex
	changes []string
}

func (r *recorder) listen(name string, from, to State) {
	r.mu.Lock()
	r.changes = append(r.changes, name+":"+from.String()+"->"+to.String())
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.changes, " ")
}

func TestTripsOnConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		b := mustNew(t, Settings{ConsecutiveFailures: 3, OnStateChange: rec.listen})
		call(b, errTransient)
		call(b, errTransient)
		call(b, nil) // a success resets the run
		call(b, errTransient)
		call(b, errDegraded)
		if got := b.State(); got != Closed {
			t.Fatalf("state after 2 consecutive failures = %v, want closed", got)
		}
		call(b, errTransient)
		if got := b.State(); got != Open {
			t.Fatalf("state after 3 consecutive failures = %v, want open", got)
		}
		_, err := b.Allow()
		if !errors.Is(err, ErrOpen) || !errors.Is(err, failure.CircuitOpen) || !errors.Is(err, failure.Degraded) {
			t.Errorf("Allow when open = %v, want degraded circuit_open matching ErrOpen", err)
		}
		if fe := failure.As(err); fe == nil || fe.Deployment != "d1" {
			t.Errorf("refusal = %#v, want Deployment d1", fe)
		}
		if got := rec.String(); got != "d1:closed->open" {
			t.Errorf("changes = %q", got)
		}
	})
}

func TestPermanentAndFatalCountAsNeither(t *testing.T) {
	b := mustNew(t, Settings{ConsecutiveFailures: 2, MinRequests: 2, FailureRate: 1})
	call(b, errTransient)
	for range 10 {
		call(b, errPermanent)
		call(b, errFatal)
	}
	if st := b.Stats(); st.State != Closed || st.ConsecutiveFailures != 1 || st.Requests != 1 {
		t.Fatalf("stats = %+v, want closed with 1 consecutive failure and 1 request", st)
	}
	call(b, errTransient)
	if got := b.State(); got != Open {
		t.Fatalf("state = %v, want open", got)
	}
}

func TestTripsOnFailureRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Settings{ConsecutiveFailures: 100, FailureRate: 0.5, MinRequests: 10, Window: 10 * time.Second, Buckets: 10})
		// 4 failures and 5 successes: 9 results, below MinRequests.
		for range 4 {
			call(b, errTransient)
			call(b, nil)
		}
		call(b, nil)
		if got := b.State(); got != Closed {
			t.Fatalf("state with 9 requests = %v, want closed", got)
		}
		call(b, errTransient) // 5 of 10 fail: 50%
		if got := b.State(); got != Open {
			t.Fatalf("state at 50%% of 10 = %v, want open", got)
		}
	})
}

func TestWindowSlides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Settings{ConsecutiveFailures: 100, FailureRate: 0.5, MinRequests: 4, Window: 10 * time.Second, Buckets: 10})
		call(b, errTransient)
		call(b, errTransient)
		call(b, errTransient)
		call(b, nil)
		call(b, nil)
		call(b, nil)
		call(b, nil) // 3 of 7
		time.Sleep(10 * time.Second)
		if st := b.Stats(); st.Requests != 0 {
			t.Fatalf("window after 10s holds %d requests, want 0", st.Requests)
		}
		time.Sleep(5 * time.Second)
		call(b, nil)
		call(b, errTransient)
		call(b, errTransient)
		if st := b.Stats(); st.State != Closed || st.Requests != 3 || st.Failures != 2 {
			t.Fatalf("stats = %+v, want closed with 3 requests, 2 failures", st)
		}
		time.Sleep(4 * time.Second) // same window
		call(b, errTransient)       // 3 of 4 fail
		if got := b.State(); got != Open {
			t.Fatalf("state = %v, want open", got)
		}
	})
}

func TestHalfOpenProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		b := mustNew(t, Settings{ConsecutiveFailures: 1, OpenFor: time.Second, HalfOpenProbes: 2, OnStateChange: rec.listen})
		call(b, errTransient)
		time.Sleep(time.Second - time.Nanosecond)
		if call(b, nil) {
			t.Fatal("call admitted before open_for passed")
		}
		time.Sleep(time.Nanosecond)
		t1, err1 := b.Allow()
		t2, err2 := b.Allow()
		_, err3 := b.Allow()
		if err1 != nil || err2 != nil || !errors.Is(err3, ErrOpen) {
			t.Fatalf("half-open admissions = %v, %v, %v; want 2 probes then refusal", err1, err2, err3)
		}
		if t1.State() != HalfOpen {
			t.Errorf("ticket state = %v, want half_open", t1.State())
		}
		t1.Done(errPermanent) // frees a slot, no verdict
		t3, err := b.Allow()
		if err != nil {
			t.Fatalf("probe after a permanent failure refused: %v", err)
		}
		t2.Done(nil)
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state after 1 of 2 probe successes = %v", got)
		}
		t3.Done(nil)
		if got := b.State(); got != Closed {
			t.Fatalf("state after 2 probe successes = %v, want closed", got)
		}
		if want := "d1:closed->open d1:open->half_open d1:half_open->closed"; rec.String() != want {
			t.Errorf("changes = %q, want %q", rec.String(), want)
		}
	})
}

func TestProbeFailureReopensWithGrowingDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Settings{ConsecutiveFailures: 1, OpenFor: time.Second, OpenForMultiplier: 3, MaxOpenFor: 5 * time.Second})
		start := time.Now()
		call(b, errTransient)
		for i, want := range []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 5 * time.Second} {
			st := b.Stats()
			if st.State != Open || st.OpenUntil.Sub(start) != want || st.Trips != i+1 {
				t.Fatalf("trip %d: %+v, want open for %v", i+1, st, want)
			}
			time.Sleep(want)
			start = time.Now()
			if !call(b, errTransient) {
				t.Fatalf("trip %d: probe refused after %v", i+1, want)
			}
		}
		time.Sleep(5 * time.Second)
		call(b, nil)
		call(b, errTransient)
		if st := b.Stats(); st.State != Open || st.OpenUntil.Sub(time.Now()) != time.Second {
			t.Errorf("after closing, next trip %+v, want open for 1s again", st)
		}
	})
}

func TestStaleResultsDiscarded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, Settings{ConsecutiveFailures: 2, OpenFor: time.Second})
		slow, _ := b.Allow() // admitted while closed
		call(b, errTransient)
		call(b, errTransient) // trips
		time.Sleep(time.Second)
		probe, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		slow.Done(nil) // from the closed generation: must not close the breaker
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state after a stale success = %v, want half_open", got)
		}
		slow.Done(errTransient) // nor reopen it
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state after a stale failure = %v, want half_open", got)
		}
		probe.Done(nil)
		if got := b.State(); got != Closed {
			t.Fatalf("state = %v, want closed", got)
		}
	})
}

// failsafe-go #97: State() kept reporting open after the delay had passed,
// until a call was attempted.
func TestRegression_FailsafeGo97_HalfOpenByTimeAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		b := mustNew(t, Settings{ConsecutiveFailures: 1, OpenFor: 30 * time.Second, OnStateChange: rec.listen})
		call(b, errTransient)
		time.Sleep(29 * time.Second)
		if got := b.State(); got != Open {
			t.Fatalf("state at 29s = %v, want open", got)
		}
		time.Sleep(time.Second)
		if got := b.State(); got != HalfOpen {
			t.Fatalf("state at 30s with no traffic = %v, want half_open", got)
		}
		if want := "d1:closed->open d1:open->half_open"; rec.String() != want {
			t.Errorf("changes = %q, want %q", rec.String(), want)
		}
	})
}

// sony/gobreaker #37: the state-change callback ran under the breaker's
// mutex, so a callback that read the breaker deadlocked. Every path that
// changes state (a result, Allow, State, Stats) is taken here; the listener
// first checks that the lock is free (so a regression fails instead of
// hanging), then calls back into the breaker.
func TestRegression_Gobreaker37_ListenerOutsideLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b *Breaker
		var seen []string
		var err error
		b, err = New("d1", Settings{ConsecutiveFailures: 1, OpenFor: time.Second, HalfOpenProbes: 1, OnStateChange: func(_ string, from, to State) {
			if !b.mu.TryLock() {
				t.Fatalf("listener for %v -> %v called with the lock held", from, to)
			}
			b.mu.Unlock()
			seen = append(seen, to.String()+"/"+b.State().String())
			_ = b.Stats()
			if tk, err := b.Allow(); err == nil {
				tk.DoneKind(failure.Permanent) // frees a probe slot
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		call(b, errTransient) // closed -> open, from a result
		time.Sleep(time.Second)
		b.State()             // open -> half_open, from State
		call(b, nil)          // half_open -> closed, from a result
		call(b, errTransient) // closed -> open
		time.Sleep(time.Second)
		b.Stats()             // open -> half_open, from Stats
		call(b, errTransient) // half_open -> open
		time.Sleep(time.Second)
		call(b, nil) // open -> half_open from Allow, then closed
		want := "open/open half_open/half_open closed/closed open/open half_open/half_open open/open half_open/half_open closed/closed"
		if got := strings.Join(seen, " "); got != want {
			t.Errorf("listener saw %q, want %q", got, want)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	b := mustNew(t, Settings{ConsecutiveFailures: 3, OpenFor: time.Millisecond, HalfOpenProbes: 2})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				var err error
				if (i+g)%3 == 0 {
					err = errTransient
				}
				call(b, err)
				_ = b.State()
			}
		})
	}
	wg.Wait()
	if st := b.Stats(); st.State > Open {
		t.Fatalf("bad state %v", st.State)
	}
}

func TestSettingsValidate(t *testing.T) {
	tests := []struct {
		s    Settings
		want string
	}{
		{Settings{ConsecutiveFailures: -1}, "breaker: consecutive_failures (-1) is negative"},
		{Settings{FailureRate: 1.5}, "breaker: failure_rate (1.5) is outside (0, 1]"},
		{Settings{MinRequests: -1}, "breaker: min_requests (-1) is negative"},
		{Settings{Window: -time.Second}, "breaker: window (-1s) is negative"},
		{Settings{Buckets: 1001}, "breaker: buckets (1001) is outside [0, 1000]"},
		{Settings{Window: 5 * time.Millisecond, Buckets: 10}, "breaker: window (5ms) / buckets (10) is below 1ms"},
		{Settings{OpenFor: -time.Second}, "breaker: open_for (-1s) is negative"},
		{Settings{OpenForMultiplier: 0.5}, "breaker: open_for_multiplier (0.5) is below 1"},
		{Settings{OpenFor: time.Minute, MaxOpenFor: time.Second}, "breaker: max_open_for (1s) is below open_for (1m0s)"},
		{Settings{HalfOpenProbes: -3}, "breaker: half_open_probes (-3) is negative"},
	}
	for _, tt := range tests {
		if _, err := New("x", tt.s); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want prefix %q", tt.s, err, tt.want)
		}
	}
	if _, err := New("x", Settings{OpenFor: 10 * time.Minute}); err != nil {
		t.Errorf("open_for above the default max: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	b := mustNew(t, Settings{})
	for range DefaultConsecutiveFailures - 1 {
		call(b, errTransient)
	}
	if b.State() != Closed {
		t.Fatal("tripped before the default 5 consecutive failures")
	}
	call(b, errTransient)
	if st := b.Stats(); st.State != Open || time.Until(st.OpenUntil) > DefaultOpenFor || time.Until(st.OpenUntil) < DefaultOpenFor-time.Second {
		t.Fatalf("stats = %+v, want open for %v", st, DefaultOpenFor)
	}
}

func TestAllowSuccessDoesNotAllocate(t *testing.T) {
	b := mustNew(t, Settings{})
	if n := testing.AllocsPerRun(100, func() { call(b, nil) }); n != 0 {
		t.Errorf("success path allocates %v times, want 0", n)
	}
	tripped := mustNew(t, Settings{ConsecutiveFailures: 1})
	call(tripped, errTransient)
	if n := testing.AllocsPerRun(100, func() { call(tripped, nil) }); n != 0 {
		t.Errorf("rejection path allocates %v times, want 0", n)
	}
}

func BenchmarkAllowDone(b *testing.B) {
	b.ReportAllocs()
	br := mustNew(b, Settings{})
	for b.Loop() {
		tk, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		tk.Done(nil)
	}
}

func BenchmarkAllowDoneParallel(b *testing.B) {
	b.ReportAllocs()
	br := mustNew(b, Settings{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk, _ := br.Allow()
			tk.Done(nil)
		}
	})
}

func BenchmarkRejected(b *testing.B) {
	b.ReportAllocs()
	br := mustNew(b, Settings{ConsecutiveFailures: 1, OpenFor: time.Hour})
	call(br, errTransient)
	for b.Loop() {
		if _, err := br.Allow(); err == nil {
			b.Fatal("admitted")
		}
	}
}
