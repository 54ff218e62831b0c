package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A run the gateway named, read and ended right after its answer (no
// flush), with tenants: the id in x-belay-run-id reaches it.
func TestAdvGatewayNamedRightAfterAnswer(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(okCompletion, "%d", "10", 1), "%d", "5", 1))
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)) + "tenants: [{name: acme, key: vk-acme}, {name: beta, key: vk-beta}]\n"
	g := newGW(t, y, nil)
	for i := range 20 {
		resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer vk-acme")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		id := resp.Header.Get("X-Belay-Run-Id")
		path := "/v1/belay/runs/" + id
		method, body := "GET", ""
		if i%2 == 1 {
			path, method, body = path+"/end", "POST", `{"status":"failed","error":"late"}`
		}
		r2, o2 := g.do(method, path, body, "Authorization", "Bearer vk-acme")
		a := decodeRun(t, o2)
		if r2.StatusCode != 200 || a.Status != "succeeded" || a.Run.Turns != 1 || a.Run.Cost == 0 || a.Run.Error != "" {
			t.Errorf("%s %s right after the answer: %d %s", method, path, r2.StatusCode, o2)
		}
		r3, o3 := g.do(method, path, body, "Authorization", "Bearer vk-beta")
		if r3.StatusCode != 404 {
			t.Errorf("beta %s acme's gateway-named run: %d %s", method, r3.StatusCode, o3)
		}
	}
}

// After an end, an Anthropic client's call is refused 409 in Anthropic's
// shape with x-should-retry false, and the run API's own errors for it are
// Anthropic's too; nothing reaches the provider.
func TestAdvAnthropicCallAfterEnd(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	hdr := map[string]string{"X-Belay-Run-Id": "an1", "Anthropic-Version": "2023-06-01", "X-Api-Key": "x"}
	body := `{"model":"claude-sonnet-5-5","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	if resp, out := h.post("/v1/messages", body, hdr); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	code, out := h.runAPI("POST", "/v1/belay/runs/an1/end", `{"status":"failed","error":"done"}`, map[string]string{"Anthropic-Version": "2023-06-01"})
	if code != 200 {
		t.Fatalf("end: %d %s", code, out)
	}
	n := h.upstreamCalls("an-1") + h.upstreamCalls("an-2")
	before := h.record("an1")
	resp, out := h.post("/v1/messages", body, hdr)
	t.Logf("%d retry=%q %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), out)
	if resp.StatusCode != 409 || !strings.Contains(out, `"type":"error"`) || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("anthropic call after the end: %d %s", resp.StatusCode, out)
	}
	after := h.record("an1")
	if h.upstreamCalls("an-1")+h.upstreamCalls("an-2") != n || after.Cost != before.Cost || after.Turns != before.Turns {
		t.Errorf("charged or sent after the end")
	}
}
