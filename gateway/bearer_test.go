package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The Bearer scheme of Authorization is read in any case, as RFC 9110
// §11.1 has auth schemes case-insensitive, on the model endpoints and the
// admin API alike (adversary finding: "bearer KEY" got 401 on both).
func TestBearerSchemeAnyCase(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme}]\n"})
	do := func(method, path, body, auth string) int {
		t.Helper()
		req, _ := http.NewRequest(method, h.gw.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		if st := do("POST", "/v1/chat/completions", chat, scheme+" vk-acme"); st != 200 {
			t.Errorf("%s vk-acme on /v1/chat/completions: %d, want 200", scheme, st)
		}
		if st := do("GET", "/v1/models", "", scheme+" vk-acme"); st != 200 {
			t.Errorf("%s vk-acme on /v1/models: %d, want 200", scheme, st)
		}
		if st := do("GET", "/admin/runs", "", scheme+" adm-key"); st != 200 {
			t.Errorf("%s adm-key on /admin/runs: %d, want 200", scheme, st)
		}
	}
	// Another scheme, or a wrong key, is still refused.
	for _, c := range []struct{ path, auth string }{
		{"/v1/models", "Basic vk-acme"}, {"/v1/models", "bearer vk-other"}, {"/v1/models", "Bearervk-acme"},
		{"/admin/runs", "Basic adm-key"}, {"/admin/runs", "bearer vk-acme"},
	} {
		if st := do("GET", c.path, "", c.auth); st != 401 {
			t.Errorf("%q on %s: %d, want 401", c.auth, c.path, st)
		}
	}
}

// A key sent in a form belay does not read (no Bearer scheme, Azure's
// api-key header) is named as such, not as missing; a path ending in
// /messages gets its 404 in Anthropic's shape whatever its prefix
// (newcomer findings).
func TestKeyFormAndMessagesPathSlips(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme}]\n"})
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, hdr := range [][2]string{{"Authorization", "vk-acme"}, {"Api-Key", "vk-acme"}} {
		resp, body := h.post("/v1/chat/completions", chat, map[string]string{hdr[0]: hdr[1]})
		if resp.StatusCode != 401 || !strings.Contains(body, "API key in an unsupported form: send the belay virtual key as Authorization: Bearer KEY") {
			t.Errorf("%s: %s: %d %s", hdr[0], hdr[1], resp.StatusCode, body)
		}
	}
	resp, body := h.post("/v1/chat/completions", chat, nil)
	if resp.StatusCode != 401 || !strings.Contains(body, "missing API key") {
		t.Errorf("no key: %d %s", resp.StatusCode, body)
	}
	resp, body = h.post("/v1/v1/messages", `{}`, map[string]string{"Authorization": "Bearer vk-acme"})
	if resp.StatusCode != 404 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, `"not_found_error"`) || !strings.Contains(body, "did you mean /v1/messages?") {
		t.Errorf("/v1/v1/messages: %d %s; want Anthropic's not_found_error with the hint", resp.StatusCode, body)
	}
}
