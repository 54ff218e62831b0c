package gateway_test

import (
	"regexp"
	"testing"
)

// With tenants configured, GET /v1/models and /v1/models/{id} need a
// virtual key, and refuse a missing or unknown one exactly as the model
// endpoints do, in the caller's dialect (newcomer finding: they answered
// anyone). Without tenants (open mode) they answer without a key.
func TestModelsNeedTheVirtualKey(t *testing.T) {
	const up = "http://127.0.0.1:1" // never reached
	g := newGW(t, tokenLimitConfig(up, "{max_turns: 5}")+"tenants: [{name: acme, key: vk-acme}]\n", nil)
	const anthropicMsg = `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name string
		hdr  []string
	}{
		{"no key", nil},
		{"unknown bearer key", []string{"Authorization", "Bearer vk-wrong"}},
		{"unknown x-api-key", []string{"X-Api-Key", "vk-wrong"}},
	} {
		for _, d := range []struct {
			dialect    string
			extra      []string
			modelPath  string
			modelsBody string
		}{
			{"openai", nil, "/v1/chat/completions", chat},
			{"anthropic", []string{"Anthropic-Version", "2023-06-01"}, "/v1/messages", anthropicMsg},
		} {
			hdr := append(append([]string(nil), c.hdr...), d.extra...)
			want, wantBody := g.do("POST", d.modelPath, d.modelsBody, hdr...)
			if want.StatusCode != 401 {
				t.Fatalf("%s, %s: POST %s: %d %s, want 401", c.name, d.dialect, d.modelPath, want.StatusCode, wantBody)
			}
			for _, path := range []string{"/v1/models", "/v1/models/m"} {
				resp, body := g.do("GET", path, "", hdr...)
				// Each answer has a request id of its own.
				reqID := regexp.MustCompile(`req_belay_[0-9a-f-]+`)
				body, wantBody := reqID.ReplaceAllString(body, "ID"), reqID.ReplaceAllString(wantBody, "ID")
				if resp.StatusCode != want.StatusCode || body != wantBody ||
					resp.Header.Get("X-Should-Retry") != want.Header.Get("X-Should-Retry") ||
					resp.Header.Get("Content-Type") != want.Header.Get("Content-Type") {
					t.Errorf("%s, %s: GET %s: %d %q (x-should-retry %q)\nwant %d %q (x-should-retry %q), as POST %s",
						c.name, d.dialect, path, resp.StatusCode, body, resp.Header.Get("X-Should-Retry"),
						want.StatusCode, wantBody, want.Header.Get("X-Should-Retry"), d.modelPath)
				}
			}
		}
	}
	for _, hdr := range [][]string{{"Authorization", "Bearer vk-acme"}, {"X-Api-Key", "vk-acme"}} {
		for _, path := range []string{"/v1/models", "/v1/models/m"} {
			if resp, body := g.do("GET", path, "", hdr...); resp.StatusCode != 200 {
				t.Errorf("GET %s with %s: %d %s, want 200", path, hdr[0], resp.StatusCode, body)
			}
		}
	}

	open := newGW(t, tokenLimitConfig(up, "{max_turns: 5}"), nil)
	for _, path := range []string{"/v1/models", "/v1/models/m"} {
		if resp, body := open.do("GET", path, ""); resp.StatusCode != 200 {
			t.Errorf("open mode: GET %s without a key: %d %s, want 200", path, resp.StatusCode, body)
		}
	}
}
