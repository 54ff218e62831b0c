package gateway_test

import (
	"bytes"
	"context"
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

// The detail of a budget refusal's log line says which limit was hit and
// the amounts, and names no reservation that has no id (newcomer finding:
// `reservation ""`, with a run's turns shown as picodollars): a turn the
// shared ledger refuses (another gateway on the same store used it), and
// a run's first step that does not fit its cost limit.
func TestBudgetRefusalLogDetail(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	})
	st, err := open.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logged bytes.Buffer
	var mu sync.Mutex
	o := gateway.Options{Store: st, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))}
	a := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 1}"), o)
	b := newGWOpts(t, tokenLimitConfig(up.URL, "{max_turns: 1}"), o)
	if resp, body := a.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "r1"); resp.StatusCode != 200 {
		t.Fatalf("first turn: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "r1"); resp.StatusCode != 403 {
		t.Fatalf("second turn, on the other gateway: %d %s, want 403 max_turns_exceeded", resp.StatusCode, body)
	}
	c := newGWOpts(t, tokenLimitConfig(up.URL, "{max_cost_usd: 0.0000001}"), o)
	resp, body := c.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 402 {
		t.Fatalf("over the cost limit: %d %s, want 402", resp.StatusCode, body)
	}
	run := resp.Header.Get(gateway.HeaderRunID)

	mu.Lock()
	log := logged.String()
	mu.Unlock()
	for _, want := range []string{
		`error="fatal: max_turns_exceeded: run used its 1 turn" detail="budget: reservation exceeds the limit: the turn limit of 1 is used up in scope \"turns:r1\""`,
		`detail="budget: reservation exceeds the limit: $0.0006012 does not fit in scope \"run:` + run + `\" (limit $0.0000001)"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, `reservation \"\"`) || strings.Contains(log, "first step") {
		t.Errorf("log names a reservation that has no id:\n%s", log)
	}
}

// A call refused for its cost estimate says, when it set no output limit,
// that the estimate holds the default output reservation and how to
// lower it, naming the limit's field in the client's API (newcomer finding: a 402 for "hi" under a $0.000001 limit did
// not say why the estimate was $0.0025). A call that set max_tokens is
// not told to.
func TestBudgetRefusalNamesTheDefaultOutputReservation(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_cost_usd: 0.0000001}"), nil)
	hint := "a call without max_completion_tokens (or max_tokens) reserves 4096 output tokens; set max_completion_tokens (or max_tokens) to reserve less, in a new run: this refusal stops the run"
	resp, body := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 402 || !strings.Contains(body, hint) {
		t.Errorf("without max_tokens: %d %s; want 402 with %q", resp.StatusCode, body, hint)
	}
	resp, body = g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 402 || strings.Contains(body, "max_tokens") {
		t.Errorf("with max_tokens: %d %s; want 402 without the hint", resp.StatusCode, body)
	}
	// The Responses API's field is max_output_tokens (newcomer finding:
	// the hint named max_tokens, which that API ignores).
	hint = "a call without max_output_tokens reserves 4096 output tokens; set max_output_tokens to reserve less"
	resp, body = g.do("POST", "/v1/responses", `{"model":"m","input":"hi"}`)
	if resp.StatusCode != 402 || !strings.Contains(body, hint) {
		t.Errorf("responses without max_output_tokens: %d %s; want 402 with %q", resp.StatusCode, body, hint)
	}
}

// Sending back the run id the gateway made for a call is refused (its run
// ended with the call), and the refusal says how to group calls (newcomer
// finding: "run … has ended (succeeded)" and nothing more).
func TestEndedRunRefusalSaysHowToGroupCalls(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, regress6OK)
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 5}"), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 200 {
		t.Fatalf("first call: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get(gateway.HeaderRunID)
	g.run(id) // written and evicted: the second call loads it from the store
	resp, body = g.do("POST", "/v1/chat/completions", chat, gateway.HeaderRunID, id)
	want := "has ended (succeeded): an ended run takes no more calls, and a run whose id the gateway made (no X-Belay-Run-Id sent) ends with its one call; to group calls in a run, send the same id of your own on each"
	if resp.StatusCode != 409 || !strings.Contains(body, want) {
		t.Errorf("second call with the gateway's run id: %d %s; want 409 with %q", resp.StatusCode, body, want)
	}
}

// A request refused for its key is logged as belay's permanent refusal,
// not as a degraded deployment (newcomer finding: `error="degraded:
// authentication: missing API key: …"`).
func TestKeyRefusalLoggedPermanent(t *testing.T) {
	var logged bytes.Buffer
	var mu sync.Mutex
	o := gateway.Options{Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))}
	g := newGWOpts(t, "listen: 127.0.0.1:0\nstore: memory://\ntenants: [{name: acme, key: vk-acme}]\n", o)
	if resp, body := g.do("POST", "/v1/chat/completions", chat); resp.StatusCode != 401 {
		t.Fatalf("no key: %d %s, want 401", resp.StatusCode, body)
	}
	mu.Lock()
	log := logged.String()
	mu.Unlock()
	if want := `error="permanent: authentication: missing API key`; !strings.Contains(log, want) {
		t.Errorf("log lacks %s:\n%s", want, log)
	}
}
