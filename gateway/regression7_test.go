package gateway_test

import (
	"bytes"
	"context"
	"errors"
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

// A provider's redirect is an answer to classify, not one to follow: the
// attempts go straight to the transport (no http.Client), so the upstream
// request, with the deployment's key in it, never goes where a 307
// points. The redirect is an unknown failure (permanent: not retried, no
// fallback) whose message names its Location.
func TestUpstreamRedirectIsNotFollowed(t *testing.T) {
	var elsewhere, d2 atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}))
	t.Cleanup(other.Close)
	gw, _ := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}, func(w http.ResponseWriter, r *http.Request) {
		d2.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}, oneAttempt)
	resp, b := postJSON(t, gw.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if elsewhere.Load() != 0 {
		t.Errorf("the redirect was followed: its target got %d requests", elsewhere.Load())
	}
	want := "redirect (307) to " + other.URL + "/v1/chat/completions, not followed; check the deployment's base_url"
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), want) || d2.Load() != 0 {
		t.Errorf("status %d, body %s, d2 called %d times; want 500 naming %q, no fallback", resp.StatusCode, b, d2.Load(), want)
	}
}

const regress7Message = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`

// Adversary finding (session 7): a 2xx answer to a non-streamed call whose
// body no client can use (cut, empty, plain text, an event stream, an
// object without the dialect's choices/content, not an object) was
// relayed as a success, the run counted as succeeded. It is a server
// error: d1's attempt fails and d2 answers, in both dialects.
func TestUnusableSuccessBodyFallsBack(t *testing.T) {
	bodies := map[string]struct{ ctype, body string }{
		"cut":          {"application/json", `{"id":"c1","choices":[{"message":{"content":"trunc`},
		"empty":        {"application/json", ``},
		"plain text":   {"text/plain", `hello`},
		"event stream": {"text/event-stream", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n"},
		"empty object": {"application/json", `{}`},
		"array":        {"application/json", `[1,2]`},
		"null member":  {"application/json", `{"choices":null,"content":null}`},
		"last is null": {"application/json", `{"choices":[],"content":[],"choices":null,"content":null}`},
	}
	for _, dl := range []struct {
		provider, model, path, base, request, ok, member string
	}{
		{"openai", "gpt-4o-mini", "/v1/chat/completions", "/v1", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, regress6OK, "choices"},
		{"anthropic", "claude-sonnet-5-5", "/v1/messages", "", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, regress7Message, "content"},
	} {
		for name, bad := range bodies {
			t.Run(dl.provider+"/"+name, func(t *testing.T) {
				var d1, d2 atomic.Int64
				s1 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					d1.Add(1)
					w.Header().Set("Content-Type", bad.ctype)
					io.WriteString(w, bad.body)
				}))
				t.Cleanup(s1.Close)
				s2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					d2.Add(1)
					w.Header().Set("Content-Type", "application/json")
					io.WriteString(w, dl.ok)
				}))
				t.Cleanup(s2.Close)
				g := newGW(t, fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1000}
models:
  - alias: m
    deployments:
      - {name: d1, provider: %[1]s, model: %[2]s, base_url: "%[3]s%[5]s", api_key: k}
      - {name: d2, provider: %[1]s, model: %[2]s, base_url: "%[4]s%[5]s", api_key: k}
`, dl.provider, dl.model, s1.URL, s2.URL, dl.base), nil)
				resp, body := g.do("POST", dl.path, dl.request, "anthropic-version", "2023-06-01")
				if resp.StatusCode != 200 || body != dl.ok || resp.Header.Get("X-Belay-Deployment") != "d2" ||
					resp.Header.Get("X-Belay-Attempts") != "2" || d1.Load() != 1 || d2.Load() != 1 {
					t.Errorf("status %d, body %s, deployment %q, attempts %q, d1 %d, d2 %d; want d2's answer after d1's one attempt",
						resp.StatusCode, body, resp.Header.Get("X-Belay-Deployment"), resp.Header.Get("X-Belay-Attempts"), d1.Load(), d2.Load())
				}
			})
		}
	}
}

// Adversary finding (session 7): a deployment whose model has no price (a
// fine-tune, a model the table lacks) was reserved and charged $0, so a
// run's money limit never held for it. With a money limit in the config
// the gateway refuses to start, naming the deployments and the pricing:
// entry to add; a pricing: entry makes it start and charge; without money
// limits it starts with a warning.
func TestUnpricedDeploymentWithMoneyLimit(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, okCompletion, 1_000_000, 1_000_000)
	})
	deps := fmt.Sprintf(`models:
  - alias: m
    deployments:
      - {name: ft, provider: openai, model: "ft:gpt-4o-mini-2024-07-18:acme::abc123", base_url: %q, api_key: k}
      - {name: ok, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: k}
`, up.URL+"/v1", up.URL+"/v1")
	build := func(y string, log *bytes.Buffer) error {
		cfg, err := config.Parse([]byte(y), "belay.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		st, err := gateway.Build(context.Background(), cfg, gateway.Options{Store: memstore.New(), Logger: slog.New(slog.NewTextHandler(log, nil))})
		if err == nil {
			st.Close(context.Background())
		}
		return err
	}
	var log bytes.Buffer
	err := build("store: memory://\nlimits: {max_cost_usd: 2}\n"+deps, &log)
	want := `config belay.yaml: no price for deployment ft (openai model "ft:gpt-4o-mini-2024-07-18:acme::abc123"), so limits.max_cost_usd $2.00 ` +
		`would count its calls as $0: add the model under pricing: (USD per million tokens), e.g. pricing: {"ft:gpt-4o-mini-2024-07-18:acme::abc123": {input: 0.30, output: 1.20}}`
	var ue *gateway.UnpricedError
	if !errors.As(err, &ue) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("with a run money limit: %v\nwant %s…", err, want)
	}
	err = build("store: memory://\nlimits: {max_turns: 5}\ntenants: [{name: a, key: k, budget: {usd: 10}}]\n"+deps, &log)
	if err == nil || !strings.Contains(err.Error(), "so tenant a's budget $10.00 would count its calls as $0") {
		t.Errorf("with a tenant budget: %v", err)
	}
	log.Reset()
	if err := build("store: memory://\nlimits: {max_turns: 5}\n"+deps, &log); err != nil {
		t.Errorf("without money limits: %v", err)
	}
	if !strings.Contains(log.String(), `level=WARN msg="no price for these deployments`) || !strings.Contains(log.String(), "ft:gpt-4o-mini") {
		t.Errorf("without money limits, no warning naming the deployment:\n%s", log.String())
	}
	// Without money limits it serves; a request asking one of a model with
	// an unpriced deployment is refused (the limit could not hold), one
	// without the header is served.
	open := newGW(t, "store: memory://\nlimits: {max_turns: 5}\n"+deps, nil)
	chat := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	resp, body := open.do("POST", "/v1/chat/completions", chat, "X-Belay-Max-Cost-Usd", "0.5")
	wantMsg := `X-Belay-Max-Cost-Usd cannot hold for model \"m\": its deployment ft has no price, so its calls count as $0`
	if resp.StatusCode != 400 || !strings.Contains(body, wantMsg) || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("a money limit asked of an unpriced model: %d %s; want 400 saying %s", resp.StatusCode, body, wantMsg)
	}
	if resp, body := open.do("POST", "/v1/chat/completions", chat); resp.StatusCode != 200 {
		t.Errorf("no money limit asked: %d %s", resp.StatusCode, body)
	}
	// Priced by the config: it starts, and a call is charged at that price.
	g := newGW(t, "store: memory://\nlimits: {max_cost_usd: 2}\npricing: {\"ft:gpt-4o-mini-2024-07-18:acme::abc123\": {input: 0.30, output: 1.20}}\n"+deps, nil)
	resp, body = g.do("POST", "/v1/chat/completions", chat, "X-Belay-Max-Cost-Usd", "1.9")
	if resp.StatusCode != 200 || resp.Header.Get("X-Belay-Cost-Usd") != "1.50" {
		t.Errorf("priced fine-tune: status %d, cost %q, body %s; want 200 at $1.50 (1M in at $0.30, 1M out at $1.20)", resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"), body)
	}
}

// Adversary finding (session 7): a stream event whose data is not JSON was
// relayed as it came, and broke the client's SDK. It is a server error:
// before any output the call falls back; after output the client's stream
// ends with an error event, not the garbage.
func TestMalformedStreamEvent(t *testing.T) {
	bad := func(prefix string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, prefix+"data: {not json\n\n"+stopChunk+"data: [DONE]\n\n")
		}
	}
	good := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, roleChunk+chunk("fine")+stopChunk+"data: [DONE]\n\n")
	}
	req := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name, prefix, want, not string
	}{
		{"before output", roleChunk, `"content":"fine"`, "not json"},
		{"after output", roleChunk + chunk("Hel"), `"error":{"message":"malformed stream event (its data is not JSON): {not json"`, "[DONE]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			gw, _ := twoDeployments(t, bad(c.prefix), good, oneAttempt)
			_, b := postJSON(t, gw.URL+"/v1/chat/completions", req)
			if !strings.Contains(string(b), c.want) || strings.Contains(string(b), c.not) {
				t.Errorf("stream:\n%s\nwant %s, not %s", b, c.want, c.not)
			}
		})
	}
}

// The admin API kills a run this gateway holds but has not stored yet: a
// call without X-Belay-Run-Id, in flight (its run is written when it
// ends), without "force"; its stream ends with the kill.
func TestAdminKillsHeldRunNotYetStored(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	gw, _ := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, roleChunk+chunk("Hel"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}, func(w http.ResponseWriter, r *http.Request) {}, oneAttempt)
	resp, err := http.Post(gw.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Belay-Run-Id")
	req, _ := http.NewRequest("POST", gw.URL+"/admin/kill", strings.NewReader(fmt.Sprintf(`{"target":"run","name":%q}`, id)))
	req.Header.Set("Authorization", "Bearer adm-key")
	kr, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := io.ReadAll(kr.Body)
	kr.Body.Close()
	if kr.StatusCode != 200 {
		t.Fatalf("kill of the held run %s: %d %s", id, kr.StatusCode, kb)
	}
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"code":"killed"`) {
		t.Errorf("the stream did not end with the kill:\n%s", b)
	}
}

// Review findings (session 7) on the answer check and the stream watcher:
// a UTF-8 byte order mark before a good answer is dropped, not a failure
// (Go's decoder refuses it, so it is not relayed either); a stream chunk
// that is JSON but types a member otherwise than belay reads is relayed
// as any chunk, not taken for garbage.
func TestBOMAnswerAndOddlyTypedChunk(t *testing.T) {
	gw, _ := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, roleChunk+chunk("Hello")+`data: {"choices":[{"index":0,"delta":{"reasoning":{"summary":"x"}}}]}`+"\n\n"+
				chunk(" world")+stopChunk+"data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "\xEF\xBB\xBF"+regress6OK)
	}, func(w http.ResponseWriter, r *http.Request) { t.Error("d2 was called") }, oneAttempt)
	resp, b := postJSON(t, gw.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || string(b) != regress6OK || resp.Header.Get("Content-Length") != fmt.Sprint(len(regress6OK)) {
		t.Errorf("BOM answer: status %d, length %s, body %q; want the answer without its BOM", resp.StatusCode, resp.Header.Get("Content-Length"), b)
	}
	resp, b = postJSON(t, gw.URL+"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if s := string(b); !strings.Contains(s, `"content":" world"`) || !strings.Contains(s, "data: [DONE]") || strings.Contains(s, `"error"`) {
		t.Errorf("stream with an oddly typed chunk:\n%s\nwant it whole, ending with [DONE]", s)
	}
}

// roundTripperFunc is an http.RoundTripper from a function.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Review finding (session 7): with attempts sent straight to the
// RoundTripper (no http.Client), an Options.Upstream that returned a
// response without a body, or no response and no error, panicked the
// handler and left the run open. Now the first is an empty answer and the
// second a connection error: each a 5xx error in the client's dialect, and
// the run is recorded.
func TestUpstreamWithoutBodyOrResponse(t *testing.T) {
	for name, rt := range map[string]roundTripperFunc{
		"no body": func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r}, nil
		},
		"no response": func(r *http.Request) (*http.Response, error) { return nil, nil },
	} {
		t.Run(name, func(t *testing.T) {
			st := memstore.New()
			g := newGWOpts(t, oneAlias("", openAIDep("d", "gpt-4o-mini", "http://127.0.0.1:1")), gateway.Options{Store: st, Upstream: rt})
			resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "nil-1")
			if resp.StatusCode < 500 || !strings.Contains(body, `"error":{`) {
				t.Errorf("status %d, body %s; want a 5xx error", resp.StatusCode, body)
			}
			if rec := g.run("nil-1"); rec.Turns != 1 {
				t.Errorf("run: %d turns, status %s; want the call counted", rec.Turns, rec.Status)
			}
		})
	}
}
