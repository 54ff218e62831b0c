package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
)

// advStreamUpstream is an upstream that writes a role chunk and one
// content chunk with usage-less stream, flushed, signals started, then
// holds the body open until the gateway cancels the request (canceled
// receives) or release is closed (then it finishes with usage + [DONE]).
type advStreamUpstream struct {
	started  chan struct{}
	canceled chan struct{}
	release  chan struct{}
}

func newAdvStreamUpstream(t *testing.T) (*advStreamUpstream, string) {
	u := &advStreamUpstream{started: make(chan struct{}, 8), canceled: make(chan struct{}, 8), release: make(chan struct{})}
	srv := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, roleChunk+chunk("Hel"))
		w.(http.Flusher).Flush()
		u.started <- struct{}{}
		select {
		case <-r.Context().Done():
			u.canceled <- struct{}{}
		case <-u.release:
			_, _ = io.WriteString(w, chunk("lo")+usageChunkEvent+"data: [DONE]\n\n")
		}
	})
	return u, srv.URL
}

// startStream posts a streaming call and reads until the content "Hel"
// has arrived; it returns the response and the reader.
func startStream(t *testing.T, g *gw, runID string, hdr ...string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	if runID != "" {
		req.Header.Set("X-Belay-Run-Id", runID)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, `"Hel"`) {
			return resp, br
		}
		if err != nil {
			t.Fatalf("stream ended before the first chunk: %v", err)
		}
	}
}

func awaitCh(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // failure guard only
		t.Fatalf("%s never happened", what)
	}
}

// Ending a client-named run while one of its calls streams: the call is
// canceled upstream, the client's stream ends with an error event (not a
// silent clean end or [DONE]), and the record the end returns matches the
// stored record once every write has landed (turns, tokens, cost).
func TestAdvEndDuringStream(t *testing.T) {
	u, url := newAdvStreamUpstream(t)
	g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", url)), nil)
	_, br := startStream(t, g, "s1")
	awaitCh(t, u.started, "upstream start")

	resp, out := g.do("POST", "/v1/belay/runs/s1/end", `{"status":"failed","error":"agent aborted"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("end: %d %s", resp.StatusCode, out)
	}
	ended := decodeRun(t, out)
	t.Logf("end answered: %s", out)
	awaitCh(t, u.canceled, "upstream cancel")
	rest, _ := io.ReadAll(br)
	t.Logf("rest of stream: %q", rest)
	if strings.Contains(string(rest), "[DONE]") || !strings.Contains(string(rest), "error") {
		t.Errorf("stream after the end: %q; want an error event and no [DONE]", rest)
	}
	flushRuns(t, g.stack)
	stored := g.run("s1")
	t.Logf("stored: status %s turns %d tokens %d/%d cost %d err %q", stored.Status, stored.Turns, stored.InputTokens, stored.OutputTokens, stored.Cost, stored.Error)
	if stored.Status != store.RunFailed || stored.Error != "agent aborted" {
		t.Errorf("stored status %s %q", stored.Status, stored.Error)
	}
	if stored.Cost == 0 {
		t.Errorf("the canceled stream was not charged")
	}
	if ended.Run.Turns != stored.Turns || ended.Run.Cost != stored.Cost || ended.Run.InputTokens != stored.InputTokens || ended.Run.OutputTokens != stored.OutputTokens {
		t.Errorf("end returned turns %d cost %d tokens %d/%d; stored turns %d cost %d tokens %d/%d",
			ended.Run.Turns, ended.Run.Cost, ended.Run.InputTokens, ended.Run.OutputTokens,
			stored.Turns, stored.Cost, stored.InputTokens, stored.OutputTokens)
	}
	// The GET after the end must agree with the store too.
	_, out = g.do("GET", "/v1/belay/runs/s1", "")
	got := decodeRun(t, out)
	if got.Run.Cost != stored.Cost || got.Run.Turns != stored.Turns {
		t.Errorf("GET after: %s", out)
	}
}

// Ending a run the gateway named (no X-Belay-Run-Id; id in the answer's
// x-belay-run-id) while its call streams, and reading it meanwhile.
func TestAdvEndGatewayNamedDuringStream(t *testing.T) {
	u, url := newAdvStreamUpstream(t)
	g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", url)), nil)
	resp, br := startStream(t, g, "")
	awaitCh(t, u.started, "upstream start")
	id := resp.Header.Get("X-Belay-Run-Id")
	if id == "" {
		t.Fatal("no run id in the answer")
	}
	gr, gout := g.do("GET", "/v1/belay/runs/"+id, "")
	t.Logf("GET while streaming: %d %s", gr.StatusCode, gout)
	if gr.StatusCode != 200 {
		t.Errorf("GET of the gateway-named run while its call streams: %d, want 200 (the id is in the answer's x-belay-run-id)", gr.StatusCode)
	}
	er, eout := g.do("POST", "/v1/belay/runs/"+id+"/end", "")
	t.Logf("END while streaming: %d %s", er.StatusCode, eout)
	select {
	case <-u.canceled:
		t.Logf("upstream canceled")
	default:
		close(u.release)
	}
	rest, _ := io.ReadAll(br)
	t.Logf("rest: %q", rest)
	flushRuns(t, g.stack)
	stored := g.run(id)
	t.Logf("stored: %+v", stored)
	if er.StatusCode == 200 {
		e := decodeRun(t, eout)
		if e.Run.Cost != stored.Cost || e.Run.Turns != stored.Turns || e.Status != string(stored.Status) {
			t.Errorf("end answered %s/%d turns/cost %d; stored %s/%d/%d", e.Status, e.Run.Turns, e.Run.Cost, stored.Status, stored.Turns, stored.Cost)
		}
	}
}

// Many concurrent ends with different statuses: all 200, one ending, all
// the same record.
func TestAdvConcurrentEnds(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(okCompletion, "%d", "10", 1), "%d", "5", 1))
	})
	for kind, open := range sharedStores(t) {
		t.Run(kind, func(t *testing.T) {
			g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)), open())
			if resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "c1"); resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, out)
			}
			const n = 40
			var wg sync.WaitGroup
			codes := make([]int, n)
			outs := make([]string, n)
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					body := `{"status":"succeeded"}`
					if i%2 == 1 {
						body = `{"status":"failed","error":"e` + string(rune('a'+i%26)) + `"}`
					}
					req, _ := http.NewRequest("POST", g.srv.URL+"/v1/belay/runs/c1/end", strings.NewReader(body))
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					codes[i], outs[i] = resp.StatusCode, string(b)
				}()
			}
			close(start)
			wg.Wait()
			stored := g.run("c1")
			for i := range n {
				if codes[i] != 200 {
					t.Errorf("end %d: %d %s", i, codes[i], outs[i])
					continue
				}
				a := decodeRun(t, outs[i])
				if a.Status != string(stored.Status) || a.Run.Error != stored.Error || !a.Run.Ended.Equal(stored.Ended) || a.Run.Turns != stored.Turns || a.Run.Cost != stored.Cost {
					t.Errorf("end %d answered %s %q ended %v turns %d cost %d; stored %s %q %v %d %d", i, a.Status, a.Run.Error, a.Run.Ended, a.Run.Turns, a.Run.Cost,
						stored.Status, stored.Error, stored.Ended, stored.Turns, stored.Cost)
				}
			}
		})
	}
}

type advErr struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Odd ids, paths and bodies: every refusal is JSON in the caller's
// dialect, 4xx, with x-should-retry false, and nothing changes.
func TestAdvOddRequests(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme}, {name: beta, key: vk-beta}]\n"})
	if resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"Authorization": "Bearer vk-acme", "X-Belay-Run-Id": "r1"}); resp.StatusCode != 200 {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	long := strings.Repeat("a", 129)
	cases := []struct {
		name, method, path, body string
		anth                     bool
		wantStatus               int
	}{
		{"slash encoded", "GET", "/v1/belay/runs/a%2Fb", "", false, 400},
		{"slash encoded end", "POST", "/v1/belay/runs/a%2Fb/end", "", false, 400},
		{"129 chars", "GET", "/v1/belay/runs/" + long, "", false, 400},
		{"another tenant's prefix", "POST", "/v1/belay/runs/beta~r1/end", "", false, 400}, // its own is taken (TestRunAPIRefusals)
		{"encoded tilde", "POST", "/v1/belay/runs/beta%7Er1/end", "", false, 400},
		{"space", "GET", "/v1/belay/runs/r%201", "", false, 400},
		{"unicode", "GET", "/v1/belay/runs/%C3%A9", "", false, 400},
		{"nul", "GET", "/v1/belay/runs/a%00b", "", false, 400},
		{"empty id end", "POST", "/v1/belay/runs//end", "", false, 405},
		{"trailing slash", "GET", "/v1/belay/runs/r1/", "", false, 404},
		{"GET on end", "GET", "/v1/belay/runs/r1/end", "", false, 405},
		{"PUT run", "PUT", "/v1/belay/runs/r1", "", false, 405},
		{"DELETE run anth", "DELETE", "/v1/belay/runs/r1", "", true, 405},
		{"huge body", "POST", "/v1/belay/runs/r1/end", `{"status":"failed","error":"` + strings.Repeat("x", 70<<10) + `"}`, false, 413},
		{"huge body anth", "POST", "/v1/belay/runs/r1/end", `{"status":"failed","error":"` + strings.Repeat("x", 70<<10) + `"}`, true, 413},
		{"array", "POST", "/v1/belay/runs/r1/end", `[]`, false, 400},
		{"trailing garbage", "POST", "/v1/belay/runs/r1/end", `{"status":"failed"} x`, false, 400},
		{"two objects", "POST", "/v1/belay/runs/r1/end", `{"status":"failed"}{}`, false, 400},
		{"status number", "POST", "/v1/belay/runs/r1/end", `{"status":1}`, false, 400},
		{"status case", "POST", "/v1/belay/runs/r1/end", `{"status":"Failed"}`, false, 400},
		{"bad status anth", "POST", "/v1/belay/runs/r1/end", `{"status":"stopped"}`, true, 400},
		{"bad id anth", "GET", "/v1/belay/runs/a%2Fb", "", true, 400},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, h.gw.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer vk-acme")
		if c.anth {
			req.Header.Del("Authorization")
			req.Header.Set("X-Api-Key", "vk-acme")
			req.Header.Set("Anthropic-Version", "2023-06-01")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e advErr
		jerr := json.Unmarshal(b, &e)
		t.Logf("%s: %d retry=%q ct=%q %.200s", c.name, resp.StatusCode, resp.Header.Get("X-Should-Retry"), resp.Header.Get("Content-Type"), b)
		if resp.StatusCode != c.wantStatus {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.wantStatus)
		}
		if jerr != nil || e.Error.Message == "" {
			t.Errorf("%s: not a JSON error: %s", c.name, b)
		}
		if c.anth && (e.Type != "error" || e.Error.Type == "") {
			t.Errorf("%s: not Anthropic's shape: %s", c.name, b)
		}
		if !c.anth && e.Type != "" {
			t.Errorf("%s: not OpenAI's shape: %s", c.name, b)
		}
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: x-should-retry %q on %d", c.name, resp.Header.Get("X-Should-Retry"), resp.StatusCode)
		}
	}
	if rec := h.record("acme~r1"); rec.Status != store.RunRunning || rec.Turns != 1 {
		t.Fatalf("after the refusals: %s, %d turns", rec.Status, rec.Turns)
	}
}

// {"error": "..."} without a status: the client's reason must not be
// dropped silently while the run is recorded as succeeded.
func TestAdvErrorWithoutStatus(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if resp, body := h.post("/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"X-Belay-Run-Id": "e1"}); resp.StatusCode != 200 {
		t.Fatalf("call: %d %s", resp.StatusCode, body)
	}
	code, body := h.runAPI("POST", "/v1/belay/runs/e1/end", `{"error":"the agent gave up"}`, nil)
	t.Logf("%d %s", code, body)
	if code == 200 {
		a := decodeRun(t, body)
		if a.Status == "succeeded" {
			t.Errorf("end with an error and no status: answered 200 succeeded, error %q dropped (want 400, or failed with the error)", a.Run.Error)
		}
	}
}
