package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
)

const regress6OK = `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`

// oneAttempt is the retry setting of a test where the first failure on d1
// falls back to d2.
const oneAttempt = "{max_attempts: 1, base: 1ms, cap: 2ms}"

// twoDeployments builds a gateway on loopback whose alias m has
// deployments d1 then d2 on upstream handlers h1 and h2, with the retry
// settings given (YAML flow mapping), and returns it and its stack.
func twoDeployments(t *testing.T, h1, h2 http.HandlerFunc, retry string) (*httptest.Server, *gateway.Stack) {
	t.Helper()
	s1 := httptest.NewServer(h1)
	t.Cleanup(s1.Close)
	s2 := httptest.NewServer(h2)
	t.Cleanup(s2.Close)
	y := twoDeploymentYAML(retry, s1.URL, s2.URL)
	cfg, err := config.Parse([]byte(y), "adv.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	st, err := gateway.Build(context.Background(), cfg, gateway.Options{Store: memstore.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	gw := httptest.NewServer(st.Server.Handler())
	t.Cleanup(gw.Close)
	return gw, st
}

// twoDeploymentYAML is the config of twoDeployments: alias m with
// deployments d1 (at url1) then d2 (at url2), the retry settings given,
// a memory store, admin key adm-key, a breaker that does not open.
func twoDeploymentYAML(retry, url1, url2 string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
admin_key: adm-key
retry: %s
breaker: {consecutive_failures: 1000}
models:
  - alias: m
    deployments:
      - {name: d1, provider: openai, model: gpt-4o-mini, base_url: %s/v1, api_key: sk-1}
      - {name: d2, provider: openai, model: gpt-4o-mini, base_url: %s/v1, api_key: sk-2}
`, retry, url1, url2)
}

// postJSON posts body to url as JSON and returns the response and its
// whole body (closed).
func postJSON(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// Adversary finding (session 6): a non-streaming call whose upstream
// answers 200 text/event-stream with an empty body. ClassifyHTTP leaves a
// 2xx event stream unread, so the body is classified after it is read
// (stream_interrupted, transient): the call falls back to d2. A shortcut
// that classified a body once when it fit in ClassifyHTTP's head had
// skipped that, and relayed an empty 200 (the shortcut is gone).
func TestEmptyEventStreamOnNonStreamCallFallsBack(t *testing.T) {
	var d2 atomic.Int64
	gw, _ := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
	}, func(w http.ResponseWriter, r *http.Request) {
		d2.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}, oneAttempt)
	resp, b := postJSON(t, gw.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || string(b) != regress6OK || d2.Load() != 1 || resp.Header.Get("X-Belay-Deployment") != "d2" {
		t.Errorf("status %d, body %q, deployment %q, d2 called %d times; want d2's answer", resp.StatusCode, b, resp.Header.Get("X-Belay-Deployment"), d2.Load())
	}
}

// A client whose base URL lacks /v1 is told so (newcomer finding).
func TestMissingV1IsNamed(t *testing.T) {
	gw, _ := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {}, func(w http.ResponseWriter, r *http.Request) {}, oneAttempt)
	resp, b := postJSON(t, gw.URL+"/chat/completions", `{"model":"m"}`)
	if resp.StatusCode != 404 || !strings.Contains(string(b), "did you mean /v1/chat/completions?") {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
}

// A request that names its run but is refused before it counts in it (a
// malformed body, an unknown model) is noted on the run's span, so the
// run's trace says why an agent's call failed (newcomer finding: an eval
// run whose agent sent messages: [] showed an empty trace). Another
// tenant's request naming the run is not noted.
func TestRefusalNotedOnItsRun(t *testing.T) {
	gw, st := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}, func(w http.ResponseWriter, r *http.Request) {}, oneAttempt)
	post := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Belay-Run-Id", "agent-run-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`); s != 200 {
		t.Fatalf("first call: %d", s)
	}
	if s := post(`{"model":"m","messages":[]}`); s != 400 {
		t.Fatalf("empty messages: %d; want 400", s)
	}
	if s := post(`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`); s != 404 {
		t.Fatalf("unknown model: %d; want 404", s)
	}
	spans := storedSpans(t, st, "agent-run-1")
	var reasons []string
	for _, s := range spans {
		if s.Kind != "run" {
			continue
		}
		for _, e := range s.Events {
			if e.Name == "request.refused" {
				reasons = append(reasons, fmt.Sprint(e.Attrs["reason"], " ", e.Attrs["http.response.status_code"]))
			}
		}
	}
	if want := []string{"invalid_request 400", "model_not_found 404"}; strings.Join(reasons, ",") != strings.Join(want, ",") {
		t.Errorf("refusals on the run span: %q; want %q", reasons, want)
	}
}
