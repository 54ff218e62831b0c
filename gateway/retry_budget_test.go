package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/belay-run/belay/trace"
)

// When a deployment's retry budget has no room, the call falls back, and
// the operator can see it: belay_retries_refused_total counts the refused
// retries per deployment, and the attempt they followed carries
// belay.retry.refused in the trace. Eight calls fail once on d1 and want
// to retry there; the retries hang, so the budget (max(3, 0.1 × 8)) lets
// three in and refuses five, which fall back to "d2". ("a" and "b" are
// the upstreams of deployments d1 and d2.)
func TestRetryBudgetRefusalsAreVisible(t *testing.T) {
	const calls, admitted = 8, 3
	release := make(chan struct{})
	var mu sync.Mutex
	seen := map[string]bool{}
	hanging, servedByB := 0, 0
	ready := make(chan struct{}) // closed once 3 retries hang on a and 5 calls reached b
	check := func() {
		if hanging == admitted && servedByB == calls-admitted {
			close(ready)
		}
	}
	answer := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchAnswer)
	}
	a := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		first := !seen[string(body)]
		seen[string(body)] = true
		if !first {
			hanging++
			check()
		}
		mu.Unlock()
		if first {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
			return
		}
		<-release
		answer(w)
	})
	b := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		servedByB++
		check()
		mu.Unlock()
		answer(w)
	})
	gw, st := twoDeployments(t, a, b, "{max_attempts: 2, base: 1ms, cap: 1ms, jitter: none, budget_ratio: 0.1}")

	type result struct {
		runID, deployment string
		err               error
	}
	results := make(chan result, calls)
	for i := range calls {
		go func() {
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"call %d"}]}`, i)
			resp, err := http.Post(gw.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d: %s", resp.StatusCode, out)
			}
			results <- result{resp.Header.Get("X-Belay-Run-Id"), resp.Header.Get("X-Belay-Deployment"), err}
		}()
	}
	<-ready
	close(release)
	served := map[string]int{}
	var runIDs []string
	for range calls {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		served[r.deployment]++
		runIDs = append(runIDs, r.runID)
	}
	if served["d1"] != admitted || served["d2"] != calls-admitted {
		t.Fatalf("served by deployment: %v; want d1: %d, d2: %d", served, admitted, calls-admitted)
	}

	metrics := get(t, gw.URL+"/metrics")
	if want := fmt.Sprintf(`belay_retries_refused_total{deployment="d1"} %d`, calls-admitted); !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "belay_retries"))
	}
	if strings.Contains(metrics, `belay_retries_refused_total{deployment="d2"}`) {
		t.Errorf("a refusal counted on b:\n%s", grepLines(metrics, "belay_retries_refused"))
	}

	ctx := context.Background()
	if err := st.Runs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Recorder.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, id := range runIDs {
		spans, err := st.Store.RunSpans(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range spans {
			if s.Attrs[trace.AttrRetryRefused] != true {
				continue
			}
			marked++
			if s.Kind != trace.KindAttempt || s.Attrs[trace.AttrDeployment] != "d1" {
				t.Errorf("span %s (%s, deployment %v) marked %s; want only a's failed attempts", s.Name, s.Kind, s.Attrs[trace.AttrDeployment], trace.AttrRetryRefused)
			}
		}
	}
	if marked != calls-admitted {
		t.Errorf("%d attempt spans marked %s; want %d", marked, trace.AttrRetryRefused, calls-admitted)
	}
}

// get returns the body of a GET of url.
func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
