package gateway_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A request carrying two tenants' keys, one in Authorization and one in
// x-api-key, is refused 401 rather than billed to one of them; the same
// key twice, or a tenant key beside a key that is no tenant's (a
// provider's key left in an SDK's environment), is served as the
// Authorization key says.
func TestTwoTenantsKeysRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "tenants: [{name: acme, key: vk-acme}, {name: globex, key: vk-globex}]\n"})
	const chat = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		auth, apiKey string
		want         int
	}{
		{"Bearer vk-acme", "vk-globex", 401},
		{"Bearer vk-acme", "vk-acme", 200},
		{"Bearer vk-acme", "sk-ant-provider-key", 200},
		{"", "vk-globex", 200},
	} {
		req, _ := http.NewRequest("POST", h.gw.URL+"/v1/chat/completions", strings.NewReader(chat))
		req.Header.Set("Content-Type", "application/json")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		req.Header.Set("X-Api-Key", c.apiKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want || (c.want == 401 && !strings.Contains(string(body), "two tenants' virtual keys")) {
			t.Errorf("Authorization %q, x-api-key %q: %d %s; want %d", c.auth, c.apiKey, resp.StatusCode, body, c.want)
		}
	}
}
