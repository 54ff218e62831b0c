package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/open"
)

// The answer goes out before the call is settled, and SQLite commits the
// settle, the record and the spans up to 25 ms later: the admin API,
// asked right after the answer, must still show the call (it flushes the
// runs it reads).
func TestAdminReadRightAfterTheAnswer(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchAnswer)
	})
	st, err := open.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}")+"admin_key: adm-key\n", st)
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, body := g.do("GET", path, "", "Authorization", "Bearer adm-key")
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		return resp.StatusCode, m
	}
	for i := range 20 {
		resp, _ := g.do("POST", "/v1/chat/completions", chat)
		id, cost := resp.Header.Get("X-Belay-Run-Id"), resp.Header.Get("X-Belay-Cost-Usd")
		if resp.StatusCode != 200 || id == "" || cost == "" {
			t.Fatalf("call %d: status %d, run %q, cost %q", i, resp.StatusCode, id, cost)
		}
		code, m := get("/admin/runs/" + id)
		run, _ := m["run"].(map[string]any)
		spans, _ := m["spans"].([]any)
		if code != 200 || run["status"] != "succeeded" || len(spans) != 3 {
			t.Fatalf("call %d: GET /admin/runs/%s right after the answer: %d, status %v, %d spans (want 200, succeeded, "+
				"the run's, the model call's and the attempt's): %v", i, id, code, run["status"], len(spans), m)
		}
		if got := fmt.Sprint(run["cost"]); got == "" || got == "0" {
			t.Errorf("call %d: stored cost %v, answered %s", i, run["cost"], cost)
		}
		code, m = get("/admin/runs?limit=1")
		runs, _ := m["runs"].([]any)
		if code != 200 || len(runs) != 1 || runs[0].(map[string]any)["id"] != id {
			t.Fatalf("call %d: GET /admin/runs right after the answer: %d %v, want run %s first", i, code, m, id)
		}
	}
}

// A call refused before it is counted in a run (a bad key) is logged as a
// refusal, with no run id: the id the gateway drew for it names no run
// (newcomer finding: "model call failed run=… error=degraded: …").
func TestRefusalBeforeARunIsLoggedWithoutOne(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	g := newGWOpts(t, tokenLimitConfig("http://127.0.0.1:1", "{max_turns: 5}")+
		"tenants: [{name: acme, key: vk-acme}]\n", gateway.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))})
	resp, _ := g.do("POST", "/v1/chat/completions", chat, "Authorization", "Bearer vk-wrong")
	if resp.StatusCode != 401 {
		t.Fatalf("bad key: %d, want 401", resp.StatusCode)
	}
	mu.Lock()
	line := logged.String()
	mu.Unlock()
	if !strings.Contains(line, "level=INFO msg=\"call refused\"") || strings.Contains(line, "run=") {
		t.Errorf("log: %s; want an INFO \"call refused\" line naming no run", line)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
