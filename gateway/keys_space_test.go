package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// A tenant key that ends in a space other than HTTP's own blanks (U+00A0,
// U+3000) authenticates a client that sends it byte for byte (a third
// review: it loaded and then never matched, as the gateway trimmed every
// Unicode space off what the client sent). Keys with a space or tab at an
// end are refused at load (config tests).
func TestTenantKeyEndingInAUnicodeSpace(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: `tenants:
  - {name: plain, key: "k-plain"}
  - {name: nbsp, key: "k-nbsp\u00a0"}
  - {name: ideo, key: "k-ideo\u3000"}
`})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	for key, want := range map[string]int{"k-plain": 200, "k-nbsp\u00a0": 200, "k-ideo\u3000": 200, "k-nbsp": 401, "k-ideo": 401} {
		req, err := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: status %d; want %d", key, resp.StatusCode, want)
		}
	}
}
