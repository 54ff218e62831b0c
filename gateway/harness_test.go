package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

const toolScript = `
rules:
  - when: {tool: get_weather, no_tool_result: get_weather}
    reply:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}]
  - when: {tool_result: get_weather}
    reply: {text: "It is sunny in Paris."}
`

// harness is a gateway on 127.0.0.1 in front of the simulator on another
// loopback server. Deployments: gpt-4o-mini → oa-1, oa-2 (openai);
// claude-sonnet-5-5 → an-1, an-2 (anthropic); "mixed" → oa-1, an-1.
type harness struct {
	t        *testing.T
	sim      *sim.Server
	simSrv   *httptest.Server
	gw       *httptest.Server
	stack    *gateway.Stack
	store    *memstore.Store
	cfg      *config.Config
	gwCalls  atomic.Int64 // model requests that reached the gateway
	inflight sync.WaitGroup
	mu       sync.Mutex
	upstream map[string]int // model requests per deployment at the sim
}

type harnessOpts struct {
	profiles map[string]sim.Profile // by deployment name
	extra    string                 // YAML appended to the config
	// extraDeployments are YAML deployments appended to gpt-4o-mini's chain.
	extraDeployments string
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, upstream: map[string]int{}}
	sc, err := sim.ParseScript([]byte(toolScript))
	if err != nil {
		t.Fatal(err)
	}
	h.sim = sim.New(sim.Config{Seed: 1, Script: sc, Deployments: o.profiles})
	h.simSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/d/"); ok && r.Method == http.MethodPost {
			name, _, _ := strings.Cut(rest, "/")
			h.mu.Lock()
			h.upstream[name]++
			h.mu.Unlock()
		}
		h.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(h.simSrv.Close)
	u := h.simSrv.URL
	y := fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
admin_key: adm-key
retry: {max_attempts: 2, base: 1ms, cap: 2ms, max_retry_after: 50ms}
breaker: {consecutive_failures: 1000}
limits: {max_turns: 50, deadline: 1m, max_cost_usd: 5}
models:
  - alias: gpt-4o-mini
    deployments:
      - {name: oa-1, provider: openai, model: gpt-4o-mini, base_url: %[1]s/d/oa-1/v1, api_key: sk-sim}
      - {name: oa-2, provider: openai, model: gpt-4o-mini, base_url: %[1]s/d/oa-2/v1, api_key: sk-sim}
%[2]s
  - alias: claude-sonnet-5-5
    deployments:
      - {name: an-1, provider: anthropic, model: claude-sonnet-5-5, base_url: %[1]s/d/an-1, api_key: sk-sim}
      - {name: an-2, provider: anthropic, model: claude-sonnet-5-5, base_url: %[1]s/d/an-2, api_key: sk-sim}
  - alias: mixed
    deployments:
      - {name: oa-1, provider: openai, model: gpt-4o-mini, base_url: %[1]s/d/oa-1/v1, api_key: sk-sim}
      - {name: an-1, provider: anthropic, model: claude-sonnet-5-5, base_url: %[1]s/d/an-1, api_key: sk-sim}
%[3]s`, u, o.extraDeployments, o.extra)
	cfg, err := config.Parse([]byte(y), "test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	h.cfg = cfg
	h.store = memstore.New()
	h.stack, err = gateway.Build(context.Background(), cfg, gateway.Options{Store: h.store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.stack.Close(context.Background()) })
	handler := h.stack.Server.Handler()
	h.gw = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/") && r.Method == http.MethodPost {
			h.gwCalls.Add(1)
		}
		h.inflight.Add(1)
		defer h.inflight.Done()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(h.gw.Close)
	return h
}

// flushRuns waits for the run records the manager writes in the
// background (when it does: Manager.Flush), so a test can read the store.
func flushRuns(t *testing.T, st *gateway.Stack) {
	t.Helper()
	if f, ok := any(st.Runs).(interface{ Flush(context.Context) error }); ok {
		if err := f.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// storedSpans returns run id's spans from the store, once the run
// records and the trace recorder's batches are written.
func storedSpans(t *testing.T, st *gateway.Stack, id string) []trace.Span {
	t.Helper()
	ctx := context.Background()
	flushRuns(t, st)
	if err := st.Recorder.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	spans, err := st.Store.RunSpans(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return spans
}

// record returns the stored run id, once the records are written.
func (h *harness) record(id string) store.Run {
	h.t.Helper()
	flushRuns(h.t, h.stack)
	r, _ := h.store.GetRun(context.Background(), id)
	return r
}

// quiesce waits until every gateway handler has returned (a streaming
// client may stop reading before the handler settles the call).
func (h *harness) quiesce() { h.inflight.Wait() }

func (h *harness) upstreamCalls(dep string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.upstream[dep]
}

// openai returns an official OpenAI client for the gateway with only the
// base URL changed (client retries at their default, 2).
func (h *harness) openai(opts ...ooption.RequestOption) *openai.Client {
	c := openai.NewClient(append([]ooption.RequestOption{ooption.WithBaseURL(h.gw.URL + "/v1/"), ooption.WithAPIKey("sk-client")}, opts...)...)
	return &c
}

func (h *harness) anthropic(opts ...aoption.RequestOption) *anthropic.Client {
	c := anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(h.gw.URL), aoption.WithAPIKey("sk-client")}, opts...)...)
	return &c
}

// post sends a raw request to the gateway.
func (h *harness) post(path, body string, hdr map[string]string) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.gw.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

var weatherTool = openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
	Name:       "get_weather",
	Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
})

var anthropicWeather = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
	Name:        "get_weather",
	InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
}}}

func userMsg(s string) []openai.ChatCompletionMessageParamUnion {
	return []openai.ChatCompletionMessageParamUnion{openai.UserMessage(s)}
}

func anthropicMsg(s string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(s))}
}
