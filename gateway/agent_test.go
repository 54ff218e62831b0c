package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/trace"
)

// X-Belay-Agent names a run's agent when its call starts the run (newcomer
// finding: gateway runs showed no agent in belay runs); the run keeps it
// whatever later calls send (belay eval names its runs' agent, and the
// agent's own header must not break them); a malformed name is refused.
func TestAgentHeaderNamesTheRun(t *testing.T) {
	gw, st := twoDeployments(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	}, func(w http.ResponseWriter, r *http.Request) {}, oneAttempt)
	var overridden string // the last answer's X-Belay-Agent-Overridden
	post := func(runID, agent string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if runID != "" {
			req.Header.Set(gateway.HeaderRunID, runID)
		}
		if agent != "" {
			req.Header.Set(gateway.HeaderAgent, agent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		overridden = resp.Header.Get(gateway.HeaderAgentOverridden)
		return resp.StatusCode, string(b)
	}
	if s, b := post("support-run-1", "support"); s != 200 || overridden != "" {
		t.Fatalf("first call: %d %s, overridden %q", s, b, overridden)
	}
	if s, b := post("support-run-1", "support"); s != 200 || overridden != "" {
		t.Fatalf("second call, same agent: %d %s, overridden %q", s, b, overridden)
	}
	if s, _ := post("support-run-1", ""); s != 200 || overridden != "" {
		t.Fatalf("a call without the header: %d, overridden %q", s, overridden)
	}
	// A later call naming another agent is served as the run's, and its
	// answer says so (helper finding: it was ignored without a word).
	if s, b := post("support-run-1", "billing"); s != 200 || overridden != "support" {
		t.Errorf("another agent's name on a later call: %d %s, overridden %q; want 200, the run keeping its agent, and support", s, b, overridden)
	}
	if s, _ := post("anonymous-run", ""); s != 200 {
		t.Fatalf("a run started without an agent: %d", s)
	}
	if s, _ := post("anonymous-run", "late"); s != 200 || overridden != "none" {
		t.Errorf("a name on a later call of a run without an agent: %d, overridden %q; want none", s, overridden)
	}
	for _, bad := range []string{"tab\tname", "not utf-8 \xff"} {
		if s, b := post("", bad); s != 400 || !strings.Contains(b, "X-Belay-Agent: want at most 128 bytes of text without control characters") {
			t.Errorf("%q: %d %s", bad, s, b)
		}
	}
	if s, _ := post("", strings.Repeat("a", 129)); s != 400 {
		t.Errorf("129 bytes: %d, want 400", s)
	}
	flushRuns(t, st)
	rec, err := st.Store.GetRun(context.Background(), "support-run-1")
	if err != nil || rec.Agent != "support" || rec.Turns != 4 {
		t.Errorf("run record: agent %q turns %d (%v); want support, 4 turns", rec.Agent, rec.Turns, err)
	}
	for _, s := range storedSpans(t, st, "support-run-1") {
		if s.Kind == trace.KindRun && (s.Attrs[trace.AttrAgentName] != "support" || s.Name != "invoke_agent support") {
			t.Errorf("run span %q attrs %v; want agent support", s.Name, s.Attrs[trace.AttrAgentName])
		}
	}
}
