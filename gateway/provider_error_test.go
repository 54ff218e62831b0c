package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A provider's own refusal reaches the client with what identifies it:
// OpenAI's error.param and x-request-id, Anthropic's request-id header and
// the body's request_id. Before, param came back null and the ids were
// dropped (adversarial review).
func TestProviderErrorKeepsParamAndRequestID(t *testing.T) {
	reply := func(status int, body string, hdr ...string) string {
		return upstream(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}).URL
	}
	oaURL := reply(400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		"X-Request-Id", "req_abc")
	anURL := reply(400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"},"request_id":"req_01X"}`,
		"Request-Id", "req_01X")
	g := newGW(t, oaAnConfig(oaURL+"/v1", anURL, "", ""), nil)

	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"oa","messages":[{"role":"user","content":"hi"}]}`)
	var oe struct {
		Error struct {
			Type  string  `json:"type"`
			Code  string  `json:"code"`
			Param *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(b), &oe); err != nil {
		t.Fatalf("openai: %v: %s", err, b)
	}
	if resp.StatusCode != 400 || oe.Error.Code != "context_length_exceeded" || oe.Error.Param == nil || *oe.Error.Param != "messages" ||
		resp.Header.Get("X-Request-Id") != "req_abc" || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("openai: %d, x-request-id %q, x-should-retry %q: %s; want 400 context_length_exceeded, param messages, req_abc, false",
			resp.StatusCode, resp.Header.Get("X-Request-Id"), resp.Header.Get("X-Should-Retry"), b)
	}

	resp, b = g.do("POST", "/v1/messages", `{"model":"an","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)
	var ae struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal([]byte(b), &ae); err != nil {
		t.Fatalf("anthropic: %v: %s", err, b)
	}
	if resp.StatusCode != 400 || ae.Type != "error" || ae.Error.Type != "invalid_request_error" || ae.RequestID != "req_01X" ||
		resp.Header.Get("Request-Id") != "req_01X" {
		t.Errorf("anthropic: %d, request-id %q: %s; want 400 invalid_request_error with request_id req_01X in the body and the header",
			resp.StatusCode, resp.Header.Get("Request-Id"), b)
	}
}

// A provider's 4xx refusal of the request reaches the client as the
// provider sent it: its status (409 stays a 409 after belay's retries, 422
// a 422), its error object whole (Anthropic's details.error_code, which
// the SDK's thread recovery reads; OpenAI's code), with x-should-retry:
// false. A refusal of the gateway's credentials (401) is still belay's
// own wording (adversarial review with the official SDKs: 409 came back
// as 500, 422 as 400, code null, details dropped).
func TestProviderRefusalRelayedAsSent(t *testing.T) {
	type reply struct {
		status int
		body   string
	}
	var replies = map[string]reply{
		"thread":        {404, `{"type":"error","error":{"type":"not_found_error","message":"thread not found","details":{"error_code":"thread_not_found"}},"request_id":"req_thr"}`},
		"conflict":      {409, `{"type":"error","error":{"type":"invalid_request_error","message":"thread already continued","details":{"error_code":"thread_already_continued"}}}`},
		"unprocessable": {422, `{"error":{"message":"bad value","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`},
		"key":           {401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`},
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		for marker, rp := range replies {
			if strings.Contains(string(b), marker) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Request-Id", "req_thr")
				w.WriteHeader(rp.status)
				_, _ = io.WriteString(w, rp.body)
				return
			}
		}
		t.Errorf("unexpected request %s", b)
	})
	g := newGW(t, oaAnConfig(up.URL+"/v1", up.URL, "retry: {max_attempts: 3, base: 1ms, cap: 2ms}\n", ""), nil)
	for _, c := range []struct {
		path, model, marker string
		status              int
		attempts            string
	}{
		{"/v1/messages", "an", "thread", 404, "1"},
		{"/v1/messages", "an", "conflict", 409, "3"},
		{"/v1/chat/completions", "oa", "unprocessable", 422, "1"},
	} {
		body := fmt.Sprintf(`{"model":%q,"max_tokens":10,"messages":[{"role":"user","content":%q}]}`, c.model, c.marker)
		resp, b := g.do("POST", c.path, body)
		want := replies[c.marker].body
		if c.path == "/v1/messages" && !strings.Contains(want, "request_id") {
			want = strings.TrimSuffix(want, "}") + `,"request_id":"req_thr"}`
		}
		if resp.StatusCode != c.status || b != want || resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("X-Belay-Attempts") != c.attempts {
			t.Errorf("%s: %d, attempts %q, x-should-retry %q:\n%s\nwant %d after %s attempts:\n%s", c.marker, resp.StatusCode,
				resp.Header.Get("X-Belay-Attempts"), resp.Header.Get("X-Should-Retry"), b, c.status, c.attempts, want)
		}
	}
	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"oa","messages":[{"role":"user","content":"key"}]}`)
	if resp.StatusCode != 502 && resp.StatusCode != 401 || !strings.Contains(b, "your key to belay was accepted") {
		t.Errorf("upstream 401: %d %s; want belay's wording about the gateway's credentials", resp.StatusCode, b)
	}
}

// belay's own refusals carry a request id, as a provider's answers do:
// x-request-id for OpenAI clients, request-id and the body's request_id
// for Anthropic's; each its own.
func TestRefusalsCarryARequestID(t *testing.T) {
	g := newGW(t, "listen: 127.0.0.1:0\nstore: memory://\n", nil)
	r1, _ := g.do("POST", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`)
	r2, _ := g.do("POST", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`)
	id1, id2 := r1.Header.Get("X-Request-Id"), r2.Header.Get("X-Request-Id")
	if r1.StatusCode != 404 || !strings.HasPrefix(id1, "req_belay_") || id1 == id2 {
		t.Errorf("openai refusals: %d, ids %q and %q; want 404 and two ids of belay's", r1.StatusCode, id1, id2)
	}
	resp, b := g.do("POST", "/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	id := resp.Header.Get("Request-Id")
	if resp.StatusCode != 404 || !strings.HasPrefix(id, "req_belay_") || !strings.Contains(b, `"request_id":"`+id+`"`) {
		t.Errorf("anthropic refusal: %d, request-id %q: %s", resp.StatusCode, id, b)
	}
}

// oaAnConfig is a gateway config (store in memory) with alias oa, deployment
// oa-1 (openai, gpt-4o-mini, at oaBase), and alias an, deployment an-1
// (anthropic, claude-sonnet-4-5, at anBase); top is added before models:,
// more after its two aliases.
func oaAnConfig(oaBase, anBase, top, more string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
store: memory://
%smodels:
  - alias: oa
    deployments: [{name: oa-1, provider: openai, model: gpt-4o-mini, base_url: %q, api_key: k}]
  - alias: an
    deployments: [{name: an-1, provider: anthropic, model: claude-sonnet-4-5, base_url: %q, api_key: k}]
%s`, top, oaBase, anBase, more)
}
