package sim_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/sim"
)

var fixedNow = func() time.Time { return time.Unix(1764400000, 0) }

// serve runs one request through the handler directly (no network).
func serve(h http.Handler, ctx context.Context, path, body string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequestWithContext(ctx, "POST", path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestStormMix(t *testing.T) {
	storm, _ := sim.LookupProfile("storm")
	storm.Latency = sim.Latency{}
	s := sim.New(sim.Config{Seed: 42, Profile: storm, Now: fixedNow})
	// A canceled context: the fault is drawn and counted, then nothing waits.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const n = 20000
	for i := range n {
		serve(s, ctx, chatPath, chatBody(fmt.Sprintf("question %d", i), true))
	}
	st := s.Stats()
	if st.Requests != n {
		t.Fatalf("requests %d", st.Requests)
	}
	want := map[string]float64{"rate_limit": .30, "overloaded": .10, "server_error": .05, "hang": .03,
		"reset": .02, "bad_gateway_html": .02, "error_in_200": .01, "stream_error": .01}
	for f, p := range want {
		got := float64(st.Faults[f]) / n
		tol := 4 * math.Sqrt(p*(1-p)/n) // 4 standard errors
		if math.Abs(got-p) > tol {
			t.Errorf("%s: %.4f, want %.2f ± %.4f", f, got, p, tol)
		}
	}
	if len(st.Faults) != len(want) {
		t.Errorf("faults %v", st.Faults)
	}
}

// transcript returns the status and body of each request in order.
func transcript(s *sim.Server, runID string, prompts []string) []string {
	var out []string
	for _, p := range prompts {
		for _, path := range []string{"/d/storm" + chatPath, "/d/storm" + messagesPath} {
			body := chatBody(p, true)
			if strings.HasSuffix(path, messagesPath) {
				body = messagesBody(p, false)
			}
			rec := serveSafe(s, path, body, "X-Belay-Run-Id", runID)
			out = append(out, fmt.Sprintf("%d %s %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body.String()))
		}
	}
	return out
}

// serveSafe serves, recording the handler's abort (reset, cut body) as code
// 0 and a request still unanswered after a second (a hang) as code -1.
func serveSafe(h http.Handler, path, body string, hdr ...string) *httptest.ResponseRecorder {
	hctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		defer func() {
			if recover() != nil {
				r := httptest.NewRecorder()
				r.Code = 0
				done <- r
			}
		}()
		done <- serve(h, hctx, path, body, hdr...)
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(time.Second):
		cancel() // a hang
		<-done
		r := httptest.NewRecorder()
		r.Code = -1
		return r
	}
}

func TestDeterministicAcrossServersAndInterleavings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		prompts := []string{"a", "b", "a", "refund order A-1", "c", "a", "d", "e", "f", "g"}
		cfg := sim.Config{Seed: 5, Now: fixedNow, Script: mustScript(t, refundScript)}
		runs := []string{"run-1", "run-2", "run-3", "run-4"}

		sequential := map[string][]string{}
		s1 := sim.New(cfg)
		for _, r := range runs {
			sequential[r] = transcript(s1, r, prompts)
		}
		// The same runs, concurrently and in another order, on a fresh server.
		s2 := sim.New(cfg)
		concurrent := map[string][]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := len(runs) - 1; i >= 0; i-- {
			wg.Go(func() {
				tr := transcript(s2, runs[i], prompts)
				mu.Lock()
				concurrent[runs[i]] = tr
				mu.Unlock()
			})
		}
		wg.Wait()
		faulty := 0
		for _, r := range runs {
			for i := range sequential[r] {
				if sequential[r][i] != concurrent[r][i] {
					t.Fatalf("%s request %d differs:\n%s\n%s", r, i, sequential[r][i], concurrent[r][i])
				}
				if !strings.HasPrefix(sequential[r][i], "200") {
					faulty++
				}
			}
		}
		if faulty == 0 {
			t.Fatal("storm produced no faults; the test would not see a difference")
		}
		cfg.Seed = 6
		other := transcript(sim.New(cfg), "run-1", prompts)
		if strings.Join(other, "\n") == strings.Join(sequential["run-1"], "\n") {
			t.Fatal("another seed gave the same transcript")
		}
	})
}

func TestHangUntilContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := sim.New(sim.Config{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- serve(s, ctx, chatPath, chatBody("hi", false), "X-Sim-Fault", "hang") }()
		time.Sleep(time.Hour)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a hung request returned before its context ended")
		default:
		}
		cancel()
		rec := <-done
		if rec.Body.Len() != 0 {
			t.Fatalf("hang wrote %q", rec.Body.String())
		}
	})
}

func TestSlowFirstTokenAndLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := sim.Profile{FirstTokenDelay: 3 * time.Second, Latency: sim.Latency{Median: 200 * time.Millisecond}}
		s := sim.New(sim.Config{Profile: p})
		start := time.Now()
		rec := serve(s, context.Background(), chatPath, chatBody("hello there", true), "X-Sim-Fault", "slow_first_token")
		if got := time.Since(start); got != 3200*time.Millisecond {
			t.Fatalf("took %v, want 3.2s", got)
		}
		if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
			t.Fatalf("body %q", rec.Body.String())
		}
	})
}

func TestLatencyDistribution(t *testing.T) {
	l := sim.Latency{Median: 100 * time.Millisecond, P99: time.Second}
	var below, above int
	const n = 20000
	rng := newRand(1)
	for range n {
		d := l.Draw(rng)
		if d <= l.Median {
			below++
		}
		if d > l.P99 {
			above++
		}
	}
	if b := float64(below) / n; math.Abs(b-0.5) > 0.02 {
		t.Errorf("P(d <= median) = %.3f", b)
	}
	if a := float64(above) / n; math.Abs(a-0.01) > 0.003 {
		t.Errorf("P(d > p99) = %.4f", a)
	}
}
