package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// okCompletion is a complete OpenAI answer with usage.
const okCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini",
"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],
"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":0}}`

// upstream is a fake OpenAI-compatible provider on 127.0.0.1.
func upstream(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// gw is a gateway over the YAML config y, with st as its store (a fresh
// memstore when nil).
type gw struct {
	t     *testing.T
	srv   *httptest.Server
	stack *gateway.Stack
	store store.Store
}

func newGW(t *testing.T, y string, st store.Store) *gw {
	t.Helper()
	return newGWOpts(t, y, gateway.Options{Store: st})
}

// newGWOpts is newGW with Build options (a nil Store is a fresh memstore,
// a nil Logger discards).
func newGWOpts(t *testing.T, y string, o gateway.Options) *gw {
	t.Helper()
	cfg, err := config.Parse([]byte(y), "test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if o.Store == nil {
		o.Store = memstore.New()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st := o.Store
	stack, err := gateway.Build(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stack.Close(context.Background()) })
	srv := httptest.NewUnstartedServer(stack.Server.Handler())
	srv.Config = stack.Server.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return &gw{t: t, srv: srv, stack: stack, store: st}
}

// do sends a request and returns the response and its body.
func (g *gw) do(method, path, body string, hdr ...string) (*http.Response, string) {
	g.t.Helper()
	return g.doCtx(context.Background(), method, path, body, hdr...)
}

func (g *gw) doCtx(ctx context.Context, method, path, body string, hdr ...string) (*http.Response, string) {
	g.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, g.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (g *gw) run(id string) store.Run {
	g.t.Helper()
	flushRuns(g.t, g.stack)
	r, err := g.store.GetRun(context.Background(), id)
	if err != nil {
		g.t.Fatal(err)
	}
	return r
}

// oneAlias is a config with alias "m" over the given deployment lines.
func oneAlias(extra string, deployments ...string) string {
	return aliasRetrying(3, extra, deployments...)
}

// aliasRetrying is oneAlias with retry.max_attempts n.
func aliasRetrying(n int, extra string, deployments ...string) string {
	y := `
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: ` + strconv.Itoa(n) + `, base: 1ms, cap: 2ms, max_retry_after: 30s}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 5}
models:
  - alias: m
    deployments:
`
	for _, d := range deployments {
		y += "      - " + d + "\n"
	}
	return y + extra
}

func openAIDep(name, model, base string) string {
	return fmt.Sprintf("{name: %s, provider: openai, model: %s, base_url: %q, api_key: k}", name, model, base+"/v1")
}

const chat = `{"model":"m","max_tokens":1000,"messages":[{"role":"user","content":"hello"}]}`

// Finding 3: the reservation was priced on the chain's first deployment
// (gpt-4o-mini here) although a fallback may be served by a dearer one
// (gpt-4o). A run limit that covers the cheap estimate but not the dear
// one must refuse the call before anything is sent.
func TestRegression_3_ReservationPricedOnMostExpensiveDeployment(t *testing.T) {
	calls := 0
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("", openAIDep("mini", "gpt-4o-mini", up.URL), openAIDep("big", "gpt-4o", up.URL)), nil)
	// Estimates for ~10 prompt tokens and 1000 output tokens: gpt-4o-mini
	// ≈ $0.0006, gpt-4o ≈ $0.01.
	resp, body := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Max-Cost-Usd", "0.005")
	if resp.StatusCode != http.StatusPaymentRequired || !strings.Contains(body, "budget_exceeded") {
		t.Fatalf("status %d body %s, want 402 budget_exceeded", resp.StatusCode, body)
	}
	if calls != 0 {
		t.Errorf("upstream calls = %d, want 0", calls)
	}
	// A limit that covers the dearest deployment admits the call.
	resp, body = g.do("POST", "/v1/chat/completions", chat, "X-Belay-Max-Cost-Usd", "0.02")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

// Finding 6: a client that disconnected during a non-streamed call was
// charged $0, although the provider had the request and bills its prompt.
func TestRegression_6_ClientDisconnectOnNonStreamedCallIsCharged(t *testing.T) {
	arrived := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server watches the connection
		close(arrived)
		<-r.Context().Done() // a long generation; the gateway gives up first
	})
	g := newGW(t, oneAlias("", openAIDep("mini", "gpt-4o-mini", up.URL)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", g.srv.URL+"/v1/chat/completions", strings.NewReader(chat))
		req.Header.Set(gateway.HeaderRunID, "gone-1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-arrived
	cancel()
	<-done
	// The run record is written by the gateway's settle, after the
	// handler saw the disconnect; wait for it by closing the server.
	g.srv.Close()
	rec := g.run("gone-1")
	if rec.InputTokens <= 0 || rec.Cost <= 0 {
		t.Fatalf("run record: %d input tokens, cost %v; want the estimated prompt charged", rec.InputTokens, rec.Cost)
	}
}

// Finding 9: a run killed while belay waits out a Retry-After answered 499
// "canceled"; the client must learn the run was killed, in its dialect.
func TestRegression_9_KillDuringRetryAfterAnswersKilled(t *testing.T) {
	for _, tc := range []struct {
		path, body, typ string
	}{
		{"/v1/chat/completions", chat, `"code":"killed"`},
		{"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, `"type":"permission_error"`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "20")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				if r.URL.Path == "/v1/messages" {
					io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
				} else {
					io.WriteString(w, `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`)
				}
			})
			dep := openAIDep("d", "gpt-4o-mini", up.URL)
			if strings.Contains(tc.path, "messages") {
				dep = fmt.Sprintf("{name: d, provider: anthropic, model: claude-sonnet-5-5, base_url: %q, api_key: k}", up.URL)
			}
			// answered is signaled when the gateway has read and closed the
			// 429: the router then waits out its Retry-After (20s).
			answered := make(chan struct{}, 1)
			g := newGWOpts(t, oneAlias("", dep), gateway.Options{Upstream: closeHook{http.DefaultTransport, answered}})
			type result struct {
				resp *http.Response
				body string
			}
			res := make(chan result, 1)
			go func() {
				resp, body := g.do("POST", tc.path, tc.body, gateway.HeaderRunID, "kill-me")
				res <- result{resp, body}
			}()
			<-answered
			if err := g.stack.Runs.Kill(context.Background(), store.KillRun, "kill-me", "operator"); err != nil {
				t.Fatal(err)
			}
			r := <-res
			if r.resp.StatusCode != http.StatusForbidden || !strings.Contains(r.body, tc.typ) {
				t.Fatalf("status %d body %s, want 403 %s", r.resp.StatusCode, r.body, tc.typ)
			}
		})
	}
}

// closeHook is a transport that signals done when a response body is
// closed.
type closeHook struct {
	rt   http.RoundTripper
	done chan struct{}
}

func (h closeHook) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.rt.RoundTrip(r)
	if err == nil {
		resp.Body = hookedBody{resp.Body, h.done}
	}
	return resp, err
}

type hookedBody struct {
	io.ReadCloser
	done chan struct{}
}

func (b hookedBody) Close() error {
	err := b.ReadCloser.Close()
	select {
	case b.done <- struct{}{}:
	default:
	}
	return err
}

// decodeError reads an OpenAI error body.
func decodeError(t *testing.T, body string) (typ, code, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Type    string  `json:"type"`
			Code    *string `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	return e.Error.Type, code, e.Error.Message
}
