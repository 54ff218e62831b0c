package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/sim"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// runAnswer is the run API's answer.
type runAnswer struct {
	Object  string    `json:"object"`
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	CostUSD string    `json:"cost_usd"`
	Run     store.Run `json:"run"`
}

func (h *harness) runAPI(method, path, body string, hdr map[string]string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.gw.URL+path, strings.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func decodeRun(t *testing.T, body string) runAnswer {
	t.Helper()
	var a runAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return a
}

// An agent that names its run reads it and ends it through its own OpenAI
// client (a custom request on the base URL), and the run then takes no
// more calls. The record's counts and cost are the calls' own.
func TestRunAPIReadAndEnd(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	client := h.openai(ooption.WithHeader("X-Belay-Run-Id", "agent-run-1"))
	var sum budget.USD
	for range 2 {
		var resp *http.Response
		if _, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")},
			ooption.WithResponseInto(&resp)); err != nil {
			t.Fatal(err)
		}
		c, err := budget.ParseUSD(resp.Header.Get("X-Belay-Cost-Usd"))
		if err != nil {
			t.Fatal(err)
		}
		sum = sum.Add(c)
	}

	var got runAnswer
	if err := client.Get(ctx, "belay/runs/agent-run-1", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "belay.run" || got.ID != "agent-run-1" || got.Status != "running" || got.Run.Turns != 2 || got.Run.Cost != sum {
		t.Fatalf("read: %+v, want running, 2 turns, cost %s", got, sum)
	}
	if got.CostUSD != sum.Decimal() || got.Run.InputTokens == 0 || got.Run.OutputTokens == 0 {
		t.Errorf("read: cost_usd %q, tokens %d/%d; want %q and the calls' tokens", got.CostUSD, got.Run.InputTokens, got.Run.OutputTokens, sum.Decimal())
	}

	var ended runAnswer
	if err := client.Post(ctx, "belay/runs/agent-run-1/end", nil, &ended); err != nil {
		t.Fatal(err)
	}
	if ended.Status != "succeeded" || ended.Run.Ended.IsZero() || ended.Run.Turns != 2 || ended.Run.Cost != sum || ended.Run.Error != "" {
		t.Fatalf("end: %+v", ended)
	}
	if rec := h.record("agent-run-1"); rec.Status != store.RunSucceeded || !rec.Ended.Equal(ended.Run.Ended) {
		t.Errorf("stored: %s ended %v, want succeeded at %v", rec.Status, rec.Ended, ended.Run.Ended)
	}

	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "run_ended" {
		t.Fatalf("call after the end: %v, want 409 run_ended", err)
	}

	// Ending again changes nothing: the first ending holds.
	var again runAnswer
	if err := client.Post(ctx, "belay/runs/agent-run-1/end", map[string]string{"status": "failed", "error": "late"}, &again); err != nil {
		t.Fatal(err)
	}
	if again.Status != "succeeded" || !again.Run.Ended.Equal(ended.Run.Ended) || again.Run.Error != "" {
		t.Errorf("second end: %+v, want the first ending kept", again)
	}
}

// A run ended as failed by its client records the client's reason; ended
// with no status, it takes its last call's outcome.
func TestRunAPIEndOutcome(t *testing.T) {
	down, _ := sim.LookupProfile("down")
	h := newHarness(t, harnessOpts{})
	call := func(run, model string) {
		t.Helper()
		resp, body := h.post("/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"X-Belay-Run-Id": run})
		if model == "gpt-4o-mini" && resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", run, resp.StatusCode, body)
		}
	}
	call("gave-up", "gpt-4o-mini")
	code, body := h.runAPI("POST", "/v1/belay/runs/gave-up/end", `{"status":"failed","error":"the agent gave up after 3 tries"}`, nil)
	if a := decodeRun(t, body); code != 200 || a.Status != "failed" || a.Run.Error != "the agent gave up after 3 tries" || a.Run.Turns != 1 {
		t.Fatalf("failed end: %d %s", code, body)
	}

	call("last-ok", "gpt-4o-mini")
	code, body = h.runAPI("POST", "/v1/belay/runs/last-ok/end", "", nil)
	if a := decodeRun(t, body); code != 200 || a.Status != "succeeded" {
		t.Fatalf("end after a good call: %d %s", code, body)
	}

	h2 := newHarness(t, harnessOpts{profiles: map[string]sim.Profile{"oa-1": down, "oa-2": down}})
	resp, b := h2.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Belay-Run-Id": "last-failed"})
	if resp.StatusCode < 500 {
		t.Fatalf("call to a down model: %d %s", resp.StatusCode, b)
	}
	code, body = h2.runAPI("POST", "/v1/belay/runs/last-failed/end", "", nil)
	if a := decodeRun(t, body); code != 200 || a.Status != "failed" || !strings.Contains(a.Run.Error, "its last call had failed") {
		t.Fatalf("end after a failed call: %d %s", code, body)
	}
}

// Bad requests get errors in the caller's dialect; another tenant's run
// and an unknown one are both 404, with nothing changed.
func TestRunAPIRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme}, {name: beta, key: vk-beta}]\n"})
	acme := map[string]string{"Authorization": "Bearer vk-acme"}
	resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Authorization": "Bearer vk-acme", "X-Belay-Run-Id": "r1"})
	if resp.StatusCode != 200 {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	type errBody struct {
		Error struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Type string `json:"type"`
	}
	cases := []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		code, anthropicType      string
		msg                      string
	}{
		{"no key", "GET", "/v1/belay/runs/r1", "", nil, 401, "invalid_api_key", "", "missing API key"},
		{"other tenant", "GET", "/v1/belay/runs/r1", "", map[string]string{"Authorization": "Bearer vk-beta"}, 404, "run_not_found", "", `run "r1" not found`},
		{"other tenant ends", "POST", "/v1/belay/runs/r1/end", "", map[string]string{"Authorization": "Bearer vk-beta"}, 404, "run_not_found", "", `run "r1" not found`},
		{"unknown", "POST", "/v1/belay/runs/nope/end", "", acme, 404, "run_not_found", "", `run "nope" not found`},
		{"another tenant's stored id", "GET", "/v1/belay/runs/beta~r1", "", acme, 400, "", "", "want 1-128 characters"},
		{"bad status", "POST", "/v1/belay/runs/r1/end", `{"status":"stopped"}`, acme, 400, "", "", `status: "stopped" is not`},
		{"unknown member", "POST", "/v1/belay/runs/r1/end", `{"state":"failed"}`, acme, 400, "", "", `unknown field "state"`},
		{"not JSON", "POST", "/v1/belay/runs/r1/end", `failed`, acme, 400, "", "", "want a JSON object"},
		{"error on success", "POST", "/v1/belay/runs/r1/end", `{"status":"succeeded","error":"x"}`, acme, 400, "", "", "a run that succeeded has no error"},
		{"anthropic client", "POST", "/v1/belay/runs/nope/end", "", map[string]string{"X-Api-Key": "vk-acme", "Anthropic-Version": "2023-06-01"}, 404, "", "not_found_error", `run "nope" not found`},
	}
	for _, c := range cases {
		code, body := h.runAPI(c.method, c.path, c.body, c.hdr)
		var e errBody
		_ = json.Unmarshal([]byte(body), &e)
		switch {
		case code != c.status || !strings.Contains(e.Error.Message, c.msg):
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, body, c.status, c.msg)
		case c.anthropicType != "" && (e.Type != "error" || e.Error.Type != c.anthropicType):
			t.Errorf("%s: %s, want Anthropic's error shape with %s", c.name, body, c.anthropicType)
		case c.anthropicType == "" && c.code != "" && e.Error.Code != c.code:
			t.Errorf("%s: code %q, want %q", c.name, e.Error.Code, c.code)
		}
	}
	// The caller's own run by its stored id (StartRun's run.ID(), the
	// ID column of belay runs) is its run (newcomer finding, session 26).
	if code, body := h.runAPI("GET", "/v1/belay/runs/acme~r1", "", acme); code != 200 || decodeRun(t, body).Run.ID != "acme~r1" {
		t.Errorf("own stored id: %d %s", code, body)
	}
	if rec := h.record("acme~r1"); rec.Status != store.RunRunning || rec.Turns != 1 {
		t.Fatalf("after the refusals: %s, %d turns; want running, 1", rec.Status, rec.Turns)
	}
	code, body := h.runAPI("POST", "/v1/belay/runs/r1/end", `{"status":"failed"}`, acme)
	if a := decodeRun(t, body); code != 200 || a.ID != "r1" || a.Run.ID != "acme~r1" || a.Status != "failed" || a.Run.Error != "ended by its client as failed" ||
		strings.Contains(body, `"note"`) {
		t.Fatalf("end: %d %s", code, body)
	}
	// Ending it again, as succeeded, keeps the first ending and says so
	// (newcomer finding, session 26: 200 with "failed", and no word).
	code, body = h.runAPI("POST", "/v1/belay/runs/r1/end", `{"status":"succeeded"}`, acme)
	if code != 200 || !strings.Contains(body, `"status":"failed"`) || !strings.Contains(body, `"note":"the run had already ended (failed) at `) ||
		!strings.Contains(body, `: its first ending is kept"`) {
		t.Errorf("a second end: %d %s", code, body)
	}
}

// A run ended through one gateway while another gateway on the same store
// holds it: the other learns of the end when it next writes the run's
// record (in the background, after a call), so it may serve a few calls
// more (2 to 4 on SQLite and 0 or 1 on PostgreSQL here, calls back to back),
// then refuses the run's calls with 409 run_ended. The stored record keeps the client's ending and counts
// every call served.
func TestRunAPIEndAcrossReplicas(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL))
	body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	for kind, open := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			a, b := newGW(t, y, open()), newGW(t, y, open())
			for i, g := range []*gw{a, b} {
				if resp, out := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "shared"); resp.StatusCode != 200 {
					t.Fatalf("call %d: %d %s", i, resp.StatusCode, out)
				}
			}
			resp, out := a.do("POST", "/v1/belay/runs/shared/end", `{"status":"failed","error":"stopped by the agent"}`)
			if got := decodeRun(t, out); resp.StatusCode != 200 || got.Run.Turns != 2 || got.Status != "failed" {
				t.Fatalf("end: %d %s; want failed with both gateways' 2 turns", resp.StatusCode, out)
			}
			// Calls back to back, then, after B's writes are done (the
			// first one of a call after the end takes the ending), one
			// that must be refused.
			served, refused := 0, false
			for i := range 4 {
				if i == 3 {
					flushRuns(t, b.stack)
				}
				resp, out := b.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "shared")
				if resp.StatusCode == 200 {
					served++
					continue
				}
				if resp.StatusCode != 409 || !strings.Contains(out, "run_ended") {
					t.Fatalf("call through the other gateway: %d %s", resp.StatusCode, out)
				}
				refused = true
				break
			}
			t.Logf("calls the other gateway served after the end: %d", served)
			if !refused {
				t.Fatalf("the other gateway served %d calls of the ended run, the last after its writes were done", served)
			}
			resp, out = b.do("GET", "/v1/belay/runs/shared", "")
			got := decodeRun(t, out)
			if resp.StatusCode != 200 || got.Status != "failed" || got.Run.Error != "stopped by the agent" || got.Run.Turns != 2+served {
				t.Fatalf("record: %d %s; want failed, %d turns", resp.StatusCode, out, 2+served)
			}
		})
	}
}

// A run ended with no status by a gateway that does not hold it takes its
// last call's outcome from that call's span in the store.
func TestRunAPIEndByStoredLastCall(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), "refuse me") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error","code":null}}`)
			return
		}
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL))
	open := sharedStores(t)["sqlite"]
	a, b := newGW(t, y, open()), newGW(t, y, open())
	for _, c := range []struct{ run, text, want string }{{"ok-elsewhere", "hi", "succeeded"}, {"failed-elsewhere", "refuse me", "failed"}} {
		resp, out := a.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"`+c.text+`"}]}`, "X-Belay-Run-Id", c.run)
		if (resp.StatusCode == 200) != (c.want == "succeeded") {
			t.Fatalf("%s: %d %s", c.run, resp.StatusCode, out)
		}
		if err := a.stack.Recorder.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		flushRuns(t, a.stack)
		resp, out = b.do("POST", "/v1/belay/runs/"+c.run+"/end", "")
		if got := decodeRun(t, out); resp.StatusCode != 200 || got.Status != c.want || got.Run.Turns != 1 {
			t.Errorf("%s ended by the other gateway: %d %s; want %s", c.run, resp.StatusCode, out, c.want)
		}
	}
}

// A run ended while one of its calls is in flight (newcomer finding: the
// call got a bare 499 "canceled", and the run, ended without a status,
// read succeeded): the call is canceled with 409 run_ended, or, once its
// stream began, an error event saying so; the run ends failed.
func TestRunAPIEndWithACallInFlight(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"partial"},"finish_reason":null}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		<-r.Context().Done() // until the gateway cancels the attempt
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL))
	g := newGW(t, y, nil)
	for _, stream := range []bool{false, true} {
		id := fmt.Sprintf("inflight-%v", stream)
		body := `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]` + map[bool]string{false: "}", true: `,"stream":true}`}[stream]
		type result struct {
			resp *http.Response
			out  string
		}
		done := make(chan result, 1)
		started := make(chan struct{})
		go func() {
			if !stream {
				close(started) // its answer comes after the end
			}
			req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Belay-Run-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				if stream {
					close(started)
				}
				done <- result{nil, err.Error()}
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			var out strings.Builder
			if stream { // the client has the stream's first output before the end
				line, _ := br.ReadString('\n')
				out.WriteString(line)
				close(started)
			}
			rest, _ := io.ReadAll(br)
			out.Write(rest)
			done <- result{resp, out.String()}
		}()
		<-arrived
		<-started
		resp, out := g.do("POST", "/v1/belay/runs/"+id+"/end", "")
		ended := decodeRun(t, out)
		if resp.StatusCode != 200 || ended.Status != "failed" || !strings.Contains(ended.Run.Error, "with a call in flight") {
			t.Fatalf("stream %v: end: %d %s; want failed, naming the call in flight", stream, resp.StatusCode, out)
		}
		res := <-done
		if res.resp == nil {
			t.Fatalf("stream %v: the call in flight: %s", stream, res.out)
		}
		want := "has ended (failed) while this call was in flight"
		if !stream && (res.resp.StatusCode != 409 || !strings.Contains(res.out, `"code":"run_ended"`) || !strings.Contains(res.out, want)) {
			t.Errorf("the call in flight: %d %s; want 409 run_ended", res.resp.StatusCode, res.out)
		}
		if stream && (res.resp.StatusCode != 200 || !strings.Contains(res.out, "partial") || !strings.Contains(res.out, `"code":"run_ended"`) || !strings.Contains(res.out, want)) {
			t.Errorf("the stream in flight: %d %s; want its output, then an error event run_ended", res.resp.StatusCode, res.out)
		}
		if rec := g.run(id); rec.Status != store.RunFailed || rec.Turns != 1 {
			t.Errorf("stream %v: stored %s with %d turns; want failed, 1", stream, rec.Status, rec.Turns)
		}
	}
}

// Paths belay does not serve are answered with where to go (newcomer
// finding: GET /, /v1/embeddings and the run API without /v1 got a bare
// "no route"), with x-should-retry: false.
func TestUnservedPathHints(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/", "belay serves POST /v1/chat/completions"},
		{"GET", "/v1", "belay serves POST /v1/chat/completions"},
		{"POST", "/v1/embeddings", "belay serves POST /v1/chat/completions"},
		{"GET", "/belay/runs/r1", "did you mean /v1/belay/runs/r1? the run API is under /v1 for every client"},
		{"POST", "/v1/runs/r1/end", "did you mean /v1/belay/runs/r1/end?"},
		{"POST", "/chat/completions", "did you mean /v1/chat/completions?"},
	} {
		code, body := h.runAPI(c.method, c.path, "", nil)
		if code != 404 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s; want 404 with %q", c.method, c.path, code, body, c.want)
		}
	}
}

// An Anthropic client (base URL without /v1) reads and ends its run with
// its own custom requests, and gets belay's errors as its own typed errors.
func TestRunAPIWithAnthropicClient(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	client := h.anthropic(aoption.WithHeader("X-Belay-Run-Id", "claude-run"))
	msg, err := client.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-5-5", MaxTokens: 64, Messages: anthropicMsg("hi")})
	if err != nil {
		t.Fatal(err)
	}
	var got runAnswer
	if err := client.Get(ctx, "/v1/belay/runs/claude-run", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "running" || got.Run.Turns != 1 || got.Run.InputTokens != msg.Usage.InputTokens {
		t.Fatalf("read: %+v; want running, 1 turn, %d input tokens", got, msg.Usage.InputTokens)
	}
	var ended runAnswer
	if err := client.Post(ctx, "/v1/belay/runs/claude-run/end", map[string]string{"status": "succeeded"}, &ended); err != nil {
		t.Fatal(err)
	}
	if ended.Status != "succeeded" || ended.Run.Ended.IsZero() {
		t.Fatalf("end: %+v", ended)
	}
	err = client.Post(ctx, "/v1/belay/runs/no-such-run/end", nil, &ended)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.Error(), "not_found_error") {
		t.Fatalf("unknown run: %v; want a 404 not_found_error", err)
	}
}

// failingReads is a store whose run reads fail, as a locked or lost store's
// do.
type failingReads struct{ *memstore.Store }

func (failingReads) GetRun(context.Context, string) (store.Run, error) {
	return store.Run{}, errors.New("database is locked")
}

// A store that cannot be read gets a retryable 503 store_unavailable in the
// caller's dialect, with Retry-After and no x-should-retry: false (the
// SDKs retry it), as a model call's store failure does.
func TestRunAPIStoreUnavailable(t *testing.T) {
	g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", "http://127.0.0.1:9")), failingReads{memstore.New()})
	resp, out := g.do("GET", "/v1/belay/runs/r1", "")
	if resp.StatusCode != 503 || !strings.Contains(out, `"store_unavailable"`) || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("Retry-After-Ms") != "1000" || resp.Header.Get("X-Should-Retry") != "" {
		t.Errorf("openai: %d %v %s", resp.StatusCode, resp.Header, out)
	}
	resp, out = g.do("GET", "/v1/belay/runs/r1", "", "Anthropic-Version", "2023-06-01")
	if resp.StatusCode != 503 || !strings.Contains(out, `"type":"error"`) || !strings.Contains(out, "store_unavailable") || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("anthropic: %d %v %s", resp.StatusCode, resp.Header, out)
	}
}
