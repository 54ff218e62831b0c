package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Each tenant's run ids are its own: two tenants naming the same run get a
// run each (stored as TENANT~ID), each answer names the id its client
// sent, and one tenant's calls neither count in the other's run nor are
// refused by it. Before, the second tenant got 403 permission_denied, and
// a tenant could take the ids another would use.
func TestEachTenantHasItsOwnRunIDs(t *testing.T) {
	g := newGW(t, "listen: 127.0.0.1:0\nstore: memory://\nadmin_key: adm-key\n"+
		"tenants: [{name: acme, key: vk-acme}, {name: bob, key: vk-bob}]\n", nil)
	body := strings.Replace(chat, `"m"`, `"gpt-4o-mini"`, 1)
	call := func(key string, hdr ...string) (*http.Response, string) {
		return g.do("POST", "/v1/chat/completions", body, append([]string{"Authorization", "Bearer " + key, "X-Belay-Run-Id", "shared"}, hdr...)...)
	}
	// acme's run takes one turn; bob's calls on the same id are his own run's.
	if resp, b := call("vk-acme", "X-Belay-Max-Turns", "1"); resp.StatusCode != 200 || resp.Header.Get("X-Belay-Run-Id") != "shared" {
		t.Fatalf("acme's first call: %d, run id %q: %s", resp.StatusCode, resp.Header.Get("X-Belay-Run-Id"), b)
	}
	for i := range 2 {
		if resp, b := call("vk-bob"); resp.StatusCode != 200 || resp.Header.Get("X-Belay-Run-Id") != "shared" {
			t.Fatalf("bob's call %d on the id acme uses: %d, run id %q: %s", i+1, resp.StatusCode, resp.Header.Get("X-Belay-Run-Id"), b)
		}
	}
	if resp, b := call("vk-acme"); resp.StatusCode != 403 || !strings.Contains(b, `"code":"max_turns_exceeded"`) {
		t.Fatalf("acme's second call: %d %s; want 403 max_turns_exceeded (its own run's one turn, bob's calls not counted)", resp.StatusCode, b)
	}
	for _, c := range []struct {
		key, tenant string
		turns       float64
	}{{"acme~shared", "acme", 1}, {"bob~shared", "bob", 2}} {
		resp, b := g.do("GET", "/admin/runs/"+c.key, "", "Authorization", "Bearer adm-key")
		if resp.StatusCode != 200 {
			t.Fatalf("GET /admin/runs/%s: %d %s", c.key, resp.StatusCode, b)
		}
		var m struct {
			Run struct {
				ID     string  `json:"id"`
				Tenant string  `json:"tenant"`
				Turns  float64 `json:"turns"`
			} `json:"run"`
		}
		if err := json.Unmarshal([]byte(b), &m); err != nil {
			t.Fatalf("GET /admin/runs/%s: %v: %s", c.key, err, b)
		}
		if m.Run.ID != c.key || m.Run.Tenant != c.tenant || m.Run.Turns != c.turns {
			t.Errorf("run %s = id %q, tenant %q, %v turns; want %q, %q, %v", c.key, m.Run.ID, m.Run.Tenant, m.Run.Turns, c.key, c.tenant, c.turns)
		}
	}
	if resp, b := g.do("GET", "/admin/runs/shared", "", "Authorization", "Bearer adm-key"); resp.StatusCode != 404 || !strings.Contains(b, "TENANT~ID") {
		t.Errorf("GET /admin/runs/shared: %d %s, want 404 with the hint (no run is stored under the bare id when tenants are configured)", resp.StatusCode, b)
	}
	// The stored form sent back as a run id is refused, saying why.
	if resp, b := call("vk-acme", "X-Belay-Run-Id", "acme~shared"); resp.StatusCode != 400 || !strings.Contains(b, "without its TENANT~ prefix") {
		t.Errorf("a stored id sent back: %d %s", resp.StatusCode, b)
	}
}

// On an open gateway (no tenants) a run is stored under the id its client
// sent.
func TestOpenGatewayKeepsRunIDs(t *testing.T) {
	g := newGW(t, "listen: 127.0.0.1:0\nstore: memory://\nadmin_key: adm-key\n", nil)
	body := strings.Replace(chat, `"m"`, `"gpt-4o-mini"`, 1)
	if resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "mine"); resp.StatusCode != 200 || resp.Header.Get("X-Belay-Run-Id") != "mine" {
		t.Fatalf("call: %d, run id %q: %s", resp.StatusCode, resp.Header.Get("X-Belay-Run-Id"), b)
	}
	if resp, b := g.do("GET", "/admin/runs/mine", "", "Authorization", "Bearer adm-key"); resp.StatusCode != 200 || !strings.Contains(b, `"id":"mine"`) {
		t.Errorf("GET /admin/runs/mine: %d %s", resp.StatusCode, b)
	}
}
