package gateway

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/route"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// serve reads the kill flags three times before it answers a call whose
// breakers are open (unservable, reopenIn, allOpenFailure). A kill set on
// the last deployment with a breaker between the second and third read
// (an operator's belay kill, landing while the call is being refused)
// leaves allOpenFailure with no open breaker and some killed deployments:
// it answers a refusal naming the kills (it indexed an empty slice and
// panicked, a 500).
func TestAdv22r_AllOpenFailureKillRaceAnswers(t *testing.T) {
	y := fmt.Sprintf(`
listen: 127.0.0.1:0
store: memory://
retry: {max_attempts: 1}
breaker: {consecutive_failures: 1, open_for: 1h}
models:
  - alias: m
    deployments:
      - {name: a, provider: openai, model: gpt-4o-mini, base_url: %[1]q, api_key: k}
      - {name: b, provider: openai, model: gpt-4o-mini, base_url: %[1]q, api_key: k}
`, "http://127.0.0.1:1/v1")
	cfg, err := config.Parse([]byte(y), "test.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	st, err := Build(context.Background(), cfg, Options{Store: memstore.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	s := st.Server
	for _, name := range []string{"a", "b"} {
		tk, err := s.router.Breaker(name).Allow()
		if err != nil {
			t.Fatal(err)
		}
		tk.DoneKind(failure.Transient)
		if !s.router.Breaker(name).Refusing() {
			t.Fatalf("breaker %s not open", name)
		}
	}
	// a is killed; b's kill lands at the third look (in allOpenFailure).
	var bLooks atomic.Int32
	s.disabled = func(d route.Deployment) (store.Kill, bool) {
		k := store.Kill{Target: store.KillDeployment, Name: d.Name, Reason: "incident", At: time.Now()}
		if d.Name == "a" {
			return k, true
		}
		return k, bLooks.Add(1) >= 3
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config = s.HTTPServer()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusInternalServerError || strings.Contains(string(b), "internal error") {
		t.Errorf("a kill landing while the call was refused for open breakers: %d %s; want a refusal (killed, or circuit_open), not a panic's 500",
			resp.StatusCode, b)
	}
}
