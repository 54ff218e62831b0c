package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
)

// With no config file, the gateway answers from the built-in simulator
// with the embedded SQLite store: `belay serve` works on a fresh machine.
func TestDefaultConfigAnswers(t *testing.T) {
	cfg := config.Default()
	cfg.Store = "sqlite://" + filepath.Join(t.TempDir(), "data", "belay.db")
	ctx := context.Background()
	st, err := gateway.Build(ctx, cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(ctx)
	srv := httptest.NewServer(st.Server.Handler())
	defer srv.Close()
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"ping"}]}`, `"chat.completion"`},
		{"/v1/messages", `{"model":"claude-sonnet-5-5","max_tokens":20,"messages":[{"role":"user","content":"ping"}]}`, `"type":"message"`},
	} {
		resp, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), tc.want) || resp.Header.Get("X-Belay-Deployment") == "" {
			t.Errorf("%s: %d %s %v", tc.path, resp.StatusCode, b, resp.Header)
		}
	}
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("readyz: %v %v", resp, err)
	}
}

// A simulated deployment's sim_profile gives it a fault profile of its
// own: a dead deployment before a healthy one, under any names, unnamed
// ones too. The profile named like a deployment ("unreachable") still
// applies without the key, and the key wins over the name.
func TestSimProfilePerDeployment(t *testing.T) {
	y := `
store: memory://
retry: {max_attempts: 1}
models:
  - alias: m
    deployments:
      - {name: primary, provider: openai, model: gpt-4o-mini, base_url: "sim://", sim_profile: down}
      - {name: down, provider: openai, model: gpt-4o-mini, base_url: "sim://", sim_profile: none}
  - alias: by-name
    deployments:
      - {name: down, provider: openai, model: gpt-4o-mini, base_url: "sim://", sim_profile: none}
  - alias: named-down
    deployments:
      - {name: unreachable, provider: openai, model: gpt-4o-mini, base_url: "sim://"}
  - alias: unnamed
    deployments:
      - {provider: openai, model: gpt-4o, base_url: "sim://", sim_profile: down}
`
	g := newGW(t, y, nil)
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"ping"}]}`
	}
	resp, out := g.do("POST", "/v1/chat/completions", body("m"))
	if resp.StatusCode != 200 || resp.Header.Get("X-Belay-Deployment") != "down" || resp.Header.Get("X-Belay-Attempts") != "2" || resp.Header.Get("X-Belay-Degraded") != "true" {
		t.Fatalf("m: %d %s %v; want the answer of deployment down (sim_profile: none) after primary (sim_profile: down) failed", resp.StatusCode, out, resp.Header)
	}
	if resp, out := g.do("POST", "/v1/chat/completions", body("by-name")); resp.StatusCode != 200 {
		t.Fatalf("by-name: %d %s", resp.StatusCode, out)
	}
	if resp, out := g.do("POST", "/v1/chat/completions", body("named-down")); resp.StatusCode < 500 || !strings.Contains(out, "connection") {
		t.Fatalf("named-down: %d %s; want the unreachable profile's failure", resp.StatusCode, out)
	}
	// An unnamed deployment's default name, "openai/gpt-4o#0", holds "/"
	// and "#", escaped in the simulator's path.
	if resp, out := g.do("POST", "/v1/chat/completions", body("unnamed")); resp.StatusCode != 503 || resp.Header.Get("X-Belay-Deployment") != "openai/gpt-4o#0" {
		t.Fatalf("unnamed: %d %s (deployment %q); want the down profile's 503", resp.StatusCode, out, resp.Header.Get("X-Belay-Deployment"))
	}
}

// A sim.script that is not there names the rule for relative paths
// (newcomer finding: the path, resolved from the config's folder, looked
// wrong without it).
func TestMissingSimScriptSaysWhereItIsRead(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "belay.yaml")
	if err := os.WriteFile(cfgPath, []byte("store: memory://\nsim: {script: examples/script.yaml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	_, err = gateway.Build(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.DiscardHandler)})
	want := filepath.Join(dir, "examples", "script.yaml")
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "read from that file's folder") {
		t.Fatalf("Build: %v; want the resolved path %s and the rule", err, want)
	}
}
