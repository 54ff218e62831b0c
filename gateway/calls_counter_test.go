package gateway

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/store/memstore"
)

func callsConfig(t *testing.T, base string) *config.Config {
	t.Helper()
	y := fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 1000}
models:
  - alias: m
    deployments:
      - {name: d, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: k}
`, base+"/v1")
	cfg, err := config.Parse([]byte(y), "test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func callsStack(t *testing.T, base string, up http.RoundTripper) (*Stack, *httptest.Server) {
	t.Helper()
	st, err := Build(context.Background(), callsConfig(t, base), Options{Store: memstore.New(), Upstream: up,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	srv := httptest.NewUnstartedServer(st.Server.Handler())
	srv.Config = st.Server.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return st, srv
}

func callsPost(t *testing.T, url, body string) (int, string, error) {
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

type panicRT struct{}

func (panicRT) RoundTrip(*http.Request) (*http.Response, error) { panic("upstream transport bug") }

// Server.calls counts the model calls in progress: a handler that panics
// (here in an Options.Upstream RoundTripper; the call answers 500) must
// not leave it counted, or no later call is ever "the only call" again.
func TestCallsCounterAfterPanic(t *testing.T) {
	st, srv := callsStack(t, "http://127.0.0.1:1", panicRT{})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if status, body, err := callsPost(t, srv.URL, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); err != nil || status != 500 {
		t.Fatalf("status %d, %v: %s; want 500 for the panic", status, err, body)
	}
	// The counter is decremented before the answer ends (the handler's
	// deferred call runs before net/http finishes the response).
	if n := st.Server.calls.Load(); n != 0 {
		t.Errorf("after a call whose handler panicked, Server.calls = %d; want 0", n)
	}
}

// The counter returns to 0 after many concurrent calls of every kind:
// answers, streams, refusals, upstream errors, clients that leave.
func TestCallsCounterBalanced(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(b), "fail"):
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"message":"boom","type":"server_error"}}`)
		case strings.Contains(string(b), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
		}
	}))
	t.Cleanup(up.Close)
	st, srv := callsStack(t, up.URL, nil)
	bodies := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"fail"}]}`,
		`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`,
		`{not json`,
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(bodies[i%len(bodies)]))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			if i%7 == 0 {
				cancel() // a client that leaves
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	srv.Close() // waits for the handlers
	if n := st.Server.calls.Load(); n != 0 {
		t.Errorf("Server.calls = %d after all calls ended; want 0", n)
	}
}
