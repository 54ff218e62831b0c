package route

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/breaker"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/retry"
)

func deployments(names ...string) []Deployment {
	out := make([]Deployment, len(names))
	for i, n := range names {
		out[i] = Deployment{Name: n, Provider: "sim", Model: "m-" + n, Dialect: "openai"}
	}
	return out
}

// testConfig has three deployments a, b, c behind alias "smart", a policy
// with no jitter (base 1s, cap 4s) and 3 attempts per deployment.
func testConfig() Config {
	return Config{
		Deployments: deployments("a", "b", "c", "big"),
		Aliases: []Alias{
			{Name: "smart", Deployments: []string{"a", "b", "c"}, ContextWindowFallback: []string{"long"}, ContentPolicyFallback: []string{"c"}},
			{Name: "long", Deployments: []string{"big"}},
		},
		Retry: retry.Policy{MaxAttempts: 3, Base: time.Second, Cap: 4 * time.Second, MaxRetryAfter: 10 * time.Second, Jitter: retry.NoJitter},
		Rand:  func() float64 { return 0.5 },
	}
}

func mustRouter(t testing.TB, cfg Config) *Router {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// script answers each call to a deployment with the next error listed for
// it (nil once the list is used up) and records the calls.
type script struct {
	mu    sync.Mutex
	errs  map[string][]error
	calls []string
}

func (s *script) call(_ context.Context, d *Deployment) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, d.Name)
	q := s.errs[d.Name]
	if len(q) == 0 {
		return nil
	}
	s.errs[d.Name] = q[1:]
	return q[0]
}

func (s *script) String() string { return strings.Join(s.calls, ",") }

func fail(r failure.Reason) *failure.Error { return failure.New(r, string(r)) }

func retryAfter(d time.Duration) *failure.Error {
	f := fail(failure.RateLimited)
	f.RetryAfter, f.HasRetryAfter, f.Status = d, true, 429
	return f
}

func noRetry() *failure.Error {
	f := fail(failure.ServerError)
	f.NoRetry = true
	return f
}

func waits(res *Result) []time.Duration {
	var out []time.Duration
	for _, a := range res.Attempts() {
		out = append(out, a.Wait)
	}
	return out
}

func TestDo(t *testing.T) {
	tests := []struct {
		name     string
		errs     map[string][]error
		calls    string
		served   string // "" for failure
		degraded bool
		reason   failure.Reason // of the returned error
		waits    []time.Duration
	}{
		{name: "success first try", calls: "a", served: "a", waits: []time.Duration{0}},
		{name: "transient retried on same deployment",
			errs:  map[string][]error{"a": {fail(failure.Overloaded), fail(failure.ServerError)}},
			calls: "a,a,a", served: "a", waits: []time.Duration{0, time.Second, 2 * time.Second}},
		{name: "plain Go error classified and retried",
			errs:  map[string][]error{"a": {io.ErrUnexpectedEOF}},
			calls: "a,a", served: "a", waits: []time.Duration{0, time.Second}},
		{name: "timeout falls to next at once",
			errs:  map[string][]error{"a": {context.DeadlineExceeded}},
			calls: "a,b", served: "b", degraded: true, waits: []time.Duration{0, 0}},
		{name: "timed-out deployment revisited after the others",
			errs:  map[string][]error{"a": {fail(failure.Timeout)}, "b": {fail(failure.QuotaExhausted)}, "c": {fail(failure.QuotaExhausted)}},
			calls: "a,b,c,a", served: "a", waits: []time.Duration{0, 0, 0, time.Second}},
		{name: "timeout on the last deployment retried there",
			errs:  map[string][]error{"a": {fail(failure.QuotaExhausted)}, "b": {fail(failure.QuotaExhausted)}, "c": {fail(failure.Timeout)}},
			calls: "a,b,c,c", served: "c", degraded: true, waits: []time.Duration{0, 0, 0, time.Second}},
		{name: "degraded falls to next",
			errs:  map[string][]error{"a": {fail(failure.QuotaExhausted)}},
			calls: "a,b", served: "b", degraded: true, waits: []time.Duration{0, 0}},
		{name: "retries used up fall to next",
			errs:  map[string][]error{"a": {fail(failure.Overloaded), fail(failure.Overloaded), fail(failure.Overloaded)}},
			calls: "a,a,a,b", served: "b", degraded: true, waits: []time.Duration{0, time.Second, 2 * time.Second, 0}},
		{name: "permanent stops",
			errs:  map[string][]error{"a": {fail(failure.InvalidRequest)}},
			calls: "a", reason: failure.InvalidRequest, waits: []time.Duration{0}},
		{name: "unknown Go error is permanent",
			errs:  map[string][]error{"a": {errors.New("weird")}},
			calls: "a", reason: failure.Unknown, waits: []time.Duration{0}},
		{name: "fatal stops",
			errs:  map[string][]error{"a": {fail(failure.BudgetExceeded)}},
			calls: "a", reason: failure.BudgetExceeded, waits: []time.Duration{0}},
		{name: "context-window fallback used",
			errs:  map[string][]error{"a": {fail(failure.ContextLengthExceeded)}},
			calls: "a,big", served: "big", degraded: true, waits: []time.Duration{0, 0}},
		{name: "context-window fallback tried once",
			errs:  map[string][]error{"a": {fail(failure.ContextLengthExceeded)}, "big": {fail(failure.ContextLengthExceeded)}},
			calls: "a,big", reason: failure.ContextLengthExceeded, waits: []time.Duration{0, 0}},
		{name: "content-policy fallback used",
			errs:  map[string][]error{"a": {fail(failure.ContentFiltered)}},
			calls: "a,c", served: "c", degraded: true, waits: []time.Duration{0, 0}},
		{name: "retry-after honoured",
			errs:  map[string][]error{"a": {retryAfter(7 * time.Second)}},
			calls: "a,a", served: "a", waits: []time.Duration{0, 7 * time.Second}},
		{name: "retry-after too long goes to next",
			errs:  map[string][]error{"a": {retryAfter(11 * time.Second)}},
			calls: "a,b", served: "b", degraded: true, waits: []time.Duration{0, 0}},
		{name: "x-should-retry false not retried on same deployment",
			errs:  map[string][]error{"a": {noRetry()}},
			calls: "a,b", served: "b", degraded: true, waits: []time.Duration{0, 0}},
		{name: "chain exhausted returns last failure",
			errs:  map[string][]error{"a": {fail(failure.Authentication)}, "b": {fail(failure.ModelNotFound)}, "c": {fail(failure.QuotaExhausted)}},
			calls: "a,b,c", reason: failure.QuotaExhausted, waits: []time.Duration{0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := mustRouter(t, testConfig())
				s := &script{errs: tt.errs}
				start := time.Now()
				res, err := r.Do(t.Context(), "smart", s.call)
				if s.String() != tt.calls {
					t.Errorf("calls = %s, want %s", s, tt.calls)
				}
				if got := waits(&res); !slices_equal(got, tt.waits) {
					t.Errorf("waits = %v, want %v", got, tt.waits)
				}
				var total time.Duration
				for _, w := range tt.waits {
					total += w
				}
				if el := time.Since(start); el != total {
					t.Errorf("Do took %v, want the waits' sum %v", el, total)
				}
				if tt.served != "" {
					if err != nil || res.Deployment == nil || res.Deployment.Name != tt.served {
						t.Fatalf("Do = %v, %v; want served by %s", res.Deployment, err, tt.served)
					}
				} else {
					fe := failure.As(err)
					if fe == nil || fe.Reason != tt.reason || res.Deployment != nil {
						t.Fatalf("Do = %v, %v; want failure %s", res.Deployment, err, tt.reason)
					}
					if last := res.Attempts()[len(res.Attempts())-1].Deployment; fe.Deployment != last {
						t.Errorf("failure names deployment %q, want %q", fe.Deployment, last)
					}
				}
				if res.Degraded != tt.degraded {
					t.Errorf("Degraded = %v, want %v", res.Degraded, tt.degraded)
				}
			})
		})
	}
}

func slices_equal(a, b []time.Duration) bool {
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

func TestAttemptBudgetAcrossChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxAttempts = 4
		r := mustRouter(t, cfg)
		down := []error{fail(failure.ServerError), fail(failure.ServerError), fail(failure.ServerError)}
		s := &script{errs: map[string][]error{"a": down, "b": slicesClone(down), "c": slicesClone(down)}}
		res, err := r.Do(t.Context(), "smart", s.call)
		if s.String() != "a,a,a,b" || len(res.Attempts()) != 4 {
			t.Fatalf("calls = %s (%d attempts), want exactly 4: a,a,a,b", s, len(res.Attempts()))
		}
		if !errors.Is(err, failure.ServerError) {
			t.Errorf("err = %v, want the last server_error", err)
		}
	})
}

func slicesClone(e []error) []error { return append([]error(nil), e...) }

func TestDefaultAttemptBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustRouter(t, testConfig()) // 3 per deployment, 3 deployments: 3+2
		s := &script{errs: map[string][]error{
			"a": {fail(failure.ServerError), fail(failure.ServerError), fail(failure.ServerError)},
			"b": {fail(failure.ServerError), fail(failure.ServerError)},
		}}
		_, err := r.Do(t.Context(), "smart", s.call)
		if s.String() != "a,a,a,b,b" || !errors.Is(err, failure.ServerError) {
			t.Fatalf("calls = %s, err %v; want a,a,a,b,b and server_error", s, err)
		}
	})
}

func TestAllBreakersOpenFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Breaker = breaker.Settings{ConsecutiveFailures: 1}
		r := mustRouter(t, cfg)
		for _, name := range []string{"a", "b", "c"} {
			tk, _ := r.Breaker(name).Allow()
			tk.Done(fail(failure.ServerError))
		}
		s := &script{}
		res, err := r.Do(t.Context(), "smart", s.call)
		if len(s.calls) != 0 || len(res.Attempts()) != 0 {
			t.Fatalf("calls = %q, want none", s)
		}
		fe := failure.As(err)
		if fe == nil || fe.Kind != failure.Degraded || fe.Reason != failure.CircuitOpen || !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("err = %v, want degraded circuit_open", err)
		}
		if want := `route: alias "smart": all 3 deployments' breakers are open (or the deployments are disabled)`; fe.Message != want {
			t.Errorf("message = %q, want %q", fe.Message, want)
		}
		if strings.Join(res.Refused(), ",") != "a,b,c" {
			t.Errorf("Refused = %v", res.Refused())
		}
	})
}

func TestOpenBreakerSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Breaker = breaker.Settings{ConsecutiveFailures: 2, OpenFor: time.Minute}
		var changes []string
		var mu sync.Mutex
		cfg.OnBreakerChange = func(d string, from, to breaker.State) {
			mu.Lock()
			changes = append(changes, d+":"+to.String())
			mu.Unlock()
		}
		r := mustRouter(t, cfg)
		// a fails twice: its breaker opens during the retries.
		s := &script{errs: map[string][]error{"a": {fail(failure.ServerError), fail(failure.ServerError)}}}
		res, err := r.Do(t.Context(), "smart", s.call)
		if err != nil || s.String() != "a,a,b" || !res.Degraded {
			t.Fatalf("calls = %s, err = %v, degraded %v; want a,a,b served by b", s, err, res.Degraded)
		}
		s2 := &script{}
		res, _ = r.Do(t.Context(), "smart", s2.call)
		if s2.String() != "b" || strings.Join(res.Refused(), ",") != "a" {
			t.Fatalf("second call: calls %s, refused %v; want b with a refused", s2, res.Refused())
		}
		if got := r.Breakers(); got["a"] != breaker.Open || got["b"] != breaker.Closed {
			t.Errorf("Breakers = %v", got)
		}
		time.Sleep(time.Minute)
		s3 := &script{}
		res, _ = r.Do(t.Context(), "smart", s3.call)
		if s3.String() != "a" || res.Attempts()[0].Breaker != breaker.HalfOpen || res.Degraded {
			t.Fatalf("after open_for: calls %s, attempts %+v", s3, res.Attempts())
		}
		if want := "a:open,a:half_open,a:closed"; strings.Join(changes, ",") != want {
			t.Errorf("changes = %v, want %s", changes, want)
		}
	})
}

func TestDeadlineStopsInsteadOfWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustRouter(t, testConfig())
		ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
		defer cancel()
		// Waits would be 1s then 2s: the second would end at 3s, past 2.5s.
		s := &script{errs: map[string][]error{"a": {fail(failure.Overloaded), fail(failure.Overloaded), fail(failure.Overloaded)}}}
		start := time.Now()
		res, err := r.Do(ctx, "smart", s.call)
		if el := time.Since(start); el != time.Second {
			t.Errorf("Do returned after %v, want 1s (no doomed wait)", el)
		}
		fe := failure.As(err)
		if fe == nil || fe.Kind != failure.Fatal || fe.Reason != failure.DeadlineExceeded {
			t.Fatalf("err = %v, want fatal deadline_exceeded", err)
		}
		var cause *failure.Error
		if !errors.As(fe.Cause, &cause) || cause.Reason != failure.Overloaded {
			t.Errorf("cause = %v, want the last overloaded failure", fe.Cause)
		}
		if s.String() != "a,a" || len(res.Attempts()) != 2 {
			t.Errorf("calls = %s", s)
		}
	})
}

func TestCanceledDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustRouter(t, testConfig())
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		s := &script{errs: map[string][]error{"a": {fail(failure.Overloaded)}}}
		_, err := r.Do(ctx, "smart", s.call)
		if !errors.Is(err, failure.Canceled) || !errors.Is(err, failure.Fatal) || s.String() != "a" {
			t.Fatalf("err = %v, calls %s; want fatal canceled after one call", err, s)
		}
	})
}

func TestRetryBudgetLimitsConcurrentRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.RetryBudget = retry.BudgetSettings{Ratio: 0.1, MinConcurrency: 2}
		cfg.Breaker = breaker.Settings{ConsecutiveFailures: 1000, MinRequests: 1000}
		r := mustRouter(t, cfg)
		// Every first call to a fails; its retry hangs until released, so
		// ten retries want to be in flight at once: the budget allows
		// max(2, 10% of 10) = 2 retry attempts on a; the others fall back.
		release := make(chan struct{})
		var mu sync.Mutex
		seen := map[*int]bool{}
		var retriedOnA, servedByB, refusedMarks int
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				id := new(int)
				res, err := r.Do(t.Context(), "smart", func(ctx context.Context, d *Deployment) error {
					mu.Lock()
					first := d.Name == "a" && !seen[id]
					seen[id] = true
					mu.Unlock()
					if first {
						return fail(failure.Overloaded)
					}
					if d.Name == "a" {
						<-release
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				// A call that fell back says why: its failed attempt on a
				// is marked, and only that one.
				for i, at := range res.Attempts() {
					if at.RetryRefused {
						refusedMarks++
						if at.Deployment != "a" || i != 0 || res.Deployment.Name != "b" {
							t.Errorf("attempt %d on %s marked RetryRefused; served by %s", i, at.Deployment, res.Deployment.Name)
						}
					}
				}
				if res.Deployment.Name == "a" {
					retriedOnA++
				} else {
					servedByB++
				}
			})
		}
		time.Sleep(2 * time.Second) // past the 1s backoff: every retry has begun or fallen back
		synctest.Wait()
		close(release)
		wg.Wait()
		if retriedOnA != 2 || servedByB != 8 || refusedMarks != 8 {
			t.Errorf("retried on a: %d, fell back to b: %d, attempts marked RetryRefused: %d; want 2, 8 and 8", retriedOnA, servedByB, refusedMarks)
		}
		if req, ret := r.deployments["a"].budget.InFlight(); req != 0 || ret != 0 {
			t.Errorf("budget leaked: %d requests, %d retries in flight", req, ret)
		}
	})
}

// Waiting for a server's Retry-After holds no retry budget: ten calls that
// all wait before their retry are all retried on the same deployment. The
// waits differ (1s, 2s, …), so the retry attempts do not overlap in time and
// only the waits could have held the budget.
func TestRetryBudgetNotHeldWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.RetryBudget = retry.BudgetSettings{Ratio: 0.1, MinConcurrency: 2}
		cfg.Breaker = breaker.Settings{ConsecutiveFailures: 1000, MinRequests: 1000}
		r := mustRouter(t, cfg)
		var mu sync.Mutex
		seen := map[*int]bool{}
		var onA int
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				id := new(int)
				res, err := r.Do(t.Context(), "smart", func(ctx context.Context, d *Deployment) error {
					mu.Lock()
					defer mu.Unlock()
					if d.Name == "a" && !seen[id] {
						seen[id] = true
						f := fail(failure.RateLimited)
						f.RetryAfter, f.HasRetryAfter = time.Duration(i+1)*time.Second, true
						return f
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if res.Deployment.Name == "a" {
					onA++
				}
			})
		}
		wg.Wait()
		if onA != 10 {
			t.Errorf("%d of 10 calls retried on a after waiting; want all", onA)
		}
	})
}

func TestUnknownAlias(t *testing.T) {
	r := mustRouter(t, testConfig())
	_, err := r.Do(t.Context(), "nope", (&script{}).call)
	if !errors.Is(err, failure.ModelNotFound) || !errors.Is(err, failure.Permanent) {
		t.Fatalf("err = %v, want permanent model_not_found", err)
	}
}

func TestCallerErrorNotModified(t *testing.T) {
	shared := fail(failure.InvalidRequest)
	r := mustRouter(t, testConfig())
	_, err := r.Do(t.Context(), "smart", func(context.Context, *Deployment) error { return shared })
	if shared.Deployment != "" {
		t.Error("Do modified the caller's *failure.Error")
	}
	if fe := failure.As(err); fe == nil || fe.Deployment != "a" {
		t.Errorf("err = %#v, want Deployment a", err)
	}
}

func TestManyAttemptsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Retry.MaxAttempts = 7
		cfg.Breaker.ConsecutiveFailures = 100
		r := mustRouter(t, cfg)
		errs := make([]error, 6)
		for i := range errs {
			errs[i] = fail(failure.ServerError)
		}
		res, err := r.Do(t.Context(), "smart", (&script{errs: map[string][]error{"a": errs}}).call)
		if err != nil || len(res.Attempts()) != 7 {
			t.Fatalf("err %v, %d attempts; want 7", err, len(res.Attempts()))
		}
		for i, a := range res.Attempts() {
			if (a.Failure == nil) != (i == 6) || a.Deployment != "a" {
				t.Errorf("attempt %d = %+v", i, a)
			}
		}
	})
}

// Rate limits do not open the breaker: a deployment that answers 429 to
// every call stays closed, and each call moves on to the next deployment.
func TestRateLimitsDoNotOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.Breaker = breaker.Settings{ConsecutiveFailures: 3}
		cfg.Retry.MaxAttempts = 1
		r := mustRouter(t, cfg)
		for range 10 {
			res, err := r.Do(t.Context(), "smart", func(ctx context.Context, d *Deployment) error {
				if d.Name == "a" {
					return retryAfter(time.Second)
				}
				return nil
			})
			if err != nil || res.Deployment.Name != "b" {
				t.Fatalf("served by %v, err %v; want b", res.Deployment, err)
			}
		}
		if st := r.Breaker("a").State(); st != breaker.Closed {
			t.Errorf("breaker of a is %v after 10 rate limits; want closed", st)
		}
	})
}

// A skipped (disabled) deployment is passed over without an attempt.
func TestSkipDisabledDeployment(t *testing.T) {
	cfg := testConfig()
	cfg.Skip = func(_ string, d *Deployment) bool { return d.Name == "a" }
	r := mustRouter(t, cfg)
	var tried []string
	res, err := r.Do(t.Context(), "smart", func(ctx context.Context, d *Deployment) error {
		tried = append(tried, d.Name)
		return nil
	})
	if err != nil || res.Deployment.Name != "b" || len(tried) != 1 {
		t.Fatalf("served by %v after trying %v (err %v); want b only", res.Deployment, tried, err)
	}
	cfg.Skip = func(string, *Deployment) bool { return true }
	r = mustRouter(t, cfg)
	_, err = r.Do(t.Context(), "smart", func(ctx context.Context, d *Deployment) error {
		t.Errorf("attempt on %s although every deployment is disabled", d.Name)
		return nil
	})
	if !errors.Is(err, failure.CircuitOpen) {
		t.Errorf("every deployment disabled: %v, want circuit_open", err)
	}
}

// Skip is asked with the alias of the call: a deployment disabled for
// one alias serves another (an alias's kill flag passes over its
// deployments, also during a call, without disabling them elsewhere).
func TestSkipByAlias(t *testing.T) {
	cfg := testConfig()
	cfg.Aliases = append(cfg.Aliases, Alias{Name: "pair", Deployments: []string{"a", "b"}})
	cfg.Skip = func(alias string, d *Deployment) bool { return alias == "smart" && d.Name == "a" }
	r := mustRouter(t, cfg)
	for alias, want := range map[string]string{"smart": "b", "pair": "a"} {
		res, err := r.Do(t.Context(), alias, func(ctx context.Context, d *Deployment) error { return nil })
		if err != nil || res.Deployment.Name != want {
			t.Errorf("%s: served by %v (err %v); want %s", alias, res.Deployment, err, want)
		}
	}
}

// pairConfig is testConfig with alias "pair" = a, b, 3 attempts per
// deployment and a chain budget of limit attempts.
func pairConfig(limit int) Config {
	cfg := testConfig()
	cfg.Aliases = append(cfg.Aliases, Alias{Name: "pair", Deployments: []string{"a", "b"}})
	cfg.MaxAttempts = limit
	return cfg
}

func repeat(f *failure.Error, n int) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = f
	}
	return out
}

func TestRevisit(t *testing.T) {
	sec := time.Second
	tests := []struct {
		name   string
		limit  int
		errs   map[string][]error
		calls  string
		served string // "" for failure
		waits  []time.Duration
	}{
		{name: "both spent: back to a with the attempts left",
			limit: 8, errs: map[string][]error{"a": repeat(fail(failure.Overloaded), 4), "b": repeat(fail(failure.ServerError), 3)},
			calls: "a,a,a,b,b,b,a,a", served: "a", waits: []time.Duration{0, sec, 2 * sec, 0, sec, 2 * sec, sec, sec}},
		{name: "revisit starts with the server's retry-after",
			limit: 7, errs: map[string][]error{"a": {fail(failure.Overloaded), fail(failure.Overloaded), retryAfter(5 * sec)}, "b": repeat(fail(failure.Timeout), 3)},
			calls: "a,a,a,b,b,b,a", served: "a", waits: []time.Duration{0, sec, 2 * sec, 0, sec, 2 * sec, 5 * sec}},
		{name: "the chain budget ends the revisits",
			limit: 7, errs: map[string][]error{"a": repeat(fail(failure.Overloaded), 9), "b": repeat(fail(failure.ServerError), 9)},
			calls: "a,a,a,b,b,b,a", waits: []time.Duration{0, sec, 2 * sec, 0, sec, 2 * sec, sec}},
		{name: "a deployment left degraded is not revisited",
			limit: 8, errs: map[string][]error{"a": {fail(failure.QuotaExhausted)}, "b": repeat(fail(failure.ServerError), 5)},
			calls: "a,b,b,b,b,b,b", served: "b", waits: []time.Duration{0, 0, sec, 2 * sec, sec, sec, 2 * sec}},
		{name: "x-should-retry false is not revisited",
			limit: 8, errs: map[string][]error{"a": {noRetry()}, "b": repeat(fail(failure.ServerError), 3), "c": nil},
			calls: "a,b,b,b,b", served: "b", waits: []time.Duration{0, 0, sec, 2 * sec, sec}},
		{name: "the default budget leaves nothing to revisit",
			limit: 0, errs: map[string][]error{"a": repeat(fail(failure.Overloaded), 9), "b": repeat(fail(failure.ServerError), 9)},
			calls: "a,a,a,b", waits: []time.Duration{0, sec, 2 * sec, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := mustRouter(t, pairConfig(tt.limit))
				s := &script{errs: tt.errs}
				res, err := r.Do(t.Context(), "pair", s.call)
				if s.String() != tt.calls {
					t.Errorf("calls = %s, want %s", s, tt.calls)
				}
				if got := waits(&res); !slices_equal(got, tt.waits) {
					t.Errorf("waits = %v, want %v", got, tt.waits)
				}
				switch {
				case tt.served != "" && (err != nil || res.Deployment == nil || res.Deployment.Name != tt.served):
					t.Errorf("Do = %v, %v; want served by %s", res.Deployment, err, tt.served)
				case tt.served == "" && (err == nil || !errors.Is(err, failure.Transient)):
					t.Errorf("Do = %v, %v; want the last transient failure", res.Deployment, err)
				}
				if tt.served != "" && res.Degraded != (tt.served != "a") {
					t.Errorf("Degraded = %v for a call served by %s", res.Degraded, tt.served)
				}
			})
		})
	}
}

// A deployment whose breaker is open does not cut a call's attempts to the
// other deployment's Retry.MaxAttempts: the chain's budget is spent there.
func TestRevisitPastOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := pairConfig(6)
		cfg.Breaker = breaker.Settings{ConsecutiveFailures: 1, OpenFor: time.Hour}
		r := mustRouter(t, cfg)
		tk, _ := r.Breaker("a").Allow()
		tk.Done(fail(failure.ServerError))
		s := &script{errs: map[string][]error{"b": {retryAfter(time.Second), retryAfter(time.Second), retryAfter(time.Second), retryAfter(time.Second), retryAfter(time.Second)}}}
		res, err := r.Do(t.Context(), "pair", s.call)
		if err != nil || s.String() != "b,b,b,b,b,b" || !res.Degraded {
			t.Fatalf("calls = %s, err = %v, degraded %v; want six calls to b, served", s, err, res.Degraded)
		}
		if got := strings.Join(res.Refused(), ","); got != "a,a" {
			t.Errorf("Refused = %s, want a on each pass", got)
		}
	})
}

// A chain of one deployment is never revisited: Retry.MaxAttempts is its
// whole budget, whatever the chain's.
func TestNoRevisitOfOneDeployment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.MaxAttempts = 10
		r := mustRouter(t, cfg)
		s := &script{errs: map[string][]error{"big": repeat(fail(failure.ServerError), 9)}}
		_, err := r.Do(t.Context(), "long", s.call)
		if s.String() != "big,big,big" || !errors.Is(err, failure.ServerError) {
			t.Fatalf("calls = %s, err = %v; want three calls and the server error", s, err)
		}
	})
}

// Adversary of session 9: the returns to a deployment, and the attempt
// budget running out as a chain moves on.
func TestRevisitEdges(t *testing.T) {
	t.Run("budget out as the chain moves on: the last failure, not a nil one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			for _, tc := range []struct {
				limit int
				errs  map[string][]error
				want  failure.Reason
			}{
				{1, map[string][]error{"a": {fail(failure.QuotaExhausted)}}, failure.QuotaExhausted},
				{3, map[string][]error{"a": repeat(fail(failure.ServerError), 9), "b": repeat(fail(failure.Timeout), 9)}, failure.ServerError},
			} {
				cfg := testConfig()
				cfg.MaxAttempts = tc.limit
				r := mustRouter(t, cfg)
				res, err := r.Do(t.Context(), "smart", (&script{errs: tc.errs}).call)
				fe := failure.As(err)
				if fe == nil || fe.Reason != tc.want || res.Deployment != nil || len(res.Attempts()) != tc.limit {
					t.Errorf("limit %d: Do = %v, %#v after %d attempts; want the %s failure", tc.limit, res.Deployment, err, len(res.Attempts()), tc.want)
				}
			}
		})
	})
	t.Run("a permanent failure on a return still gets the alias's fallback", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := testConfig()
			cfg.Aliases = append(cfg.Aliases, Alias{Name: "cf", Deployments: []string{"a", "b"}, ContentPolicyFallback: []string{"big"}})
			cfg.MaxAttempts = 8
			r := mustRouter(t, cfg)
			s := &script{errs: map[string][]error{
				"a": append(repeat(fail(failure.ServerError), 3), fail(failure.ContentFiltered)),
				"b": repeat(fail(failure.ServerError), 3)}}
			res, err := r.Do(t.Context(), "cf", s.call)
			if err != nil || s.String() != "a,a,a,b,b,b,a,big" || res.Deployment.Name != "big" || !res.Degraded {
				t.Fatalf("calls %s, Do = %v, %v; want a,a,a,b,b,b,a,big served by big", s, res.Deployment, err)
			}
		})
	})
	t.Run("the latest failure is reported", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := pairConfig(6)
			cfg.Retry.MaxAttempts = 2
			r := mustRouter(t, cfg)
			late := fail(failure.Overloaded)
			late.Message = "latest"
			s := &script{errs: map[string][]error{"a": {fail(failure.ServerError), fail(failure.ServerError), late, late},
				"b": {retryAfter(time.Second), retryAfter(time.Second)}}}
			_, err := r.Do(t.Context(), "pair", s.call)
			if fe := failure.As(err); s.String() != "a,a,b,b,a,a" || fe == nil || fe.Message != "latest" || fe.Deployment != "a" {
				t.Fatalf("calls %s, err %v; want a,a,b,b,a,a and a's latest failure", s, err)
			}
		})
	})
	t.Run("one attempt per deployment still goes round", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := pairConfig(6)
			cfg.Retry.MaxAttempts = 1
			r := mustRouter(t, cfg)
			s := &script{errs: map[string][]error{"a": {fail(failure.ServerError)}, "b": {fail(failure.ServerError)}}}
			res, err := r.Do(t.Context(), "pair", s.call)
			if err != nil || s.String() != "a,b,a" || res.Deployment.Name != "a" || !slices_equal(waits(&res), []time.Duration{0, 0, time.Second}) {
				t.Fatalf("calls %s, waits %v, Do = %v, %v; want a,b,a served by a after a 1s backoff", s, waits(&res), res.Deployment, err)
			}
		})
	})
	t.Run("no wait for a return the retry budget has no room for", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg := pairConfig(5)
			cfg.RetryBudget = retry.BudgetSettings{MinConcurrency: 1, Ratio: 0.01}
			r := mustRouter(t, cfg)
			s := &script{errs: map[string][]error{"a": {fail(failure.ServerError)}, "b": repeat(fail(failure.ServerError), 9)}}
			// a's one attempt fails and its retry is refused (another
			// call holds a's one retry) after the 1s backoff; b's three
			// fail; the return to a is not waited for; b gets the last.
			if !r.deployments["a"].budget.TryRetry() {
				t.Fatal("could not hold a's retry")
			}
			defer r.deployments["a"].budget.DoneRetry()
			start := time.Now()
			res, err := r.Do(t.Context(), "pair", s.call)
			as := res.Attempts()
			end := as[len(as)-1].Start.Add(as[len(as)-1].Duration)
			// The waits: a's 1s backoff before its refused retry; b's 1s
			// and 2s; 1s before the return to b. None before a return to a.
			if s.String() != "a,b,b,b,b" || err == nil || !end.Equal(time.Now()) || !as[0].RetryRefused || time.Since(start) != 5*time.Second {
				t.Fatalf("calls %s, err %v, returned %v after the last call (Do took %v); want a,b,b,b,b in 5s", s, err, time.Since(end), time.Since(start))
			}
		})
	})
}
