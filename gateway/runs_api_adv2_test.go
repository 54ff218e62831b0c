package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// A non-streamed call in flight when its run is ended: what its client
// gets (status, body, x-should-retry), and whether it is charged.
func TestAdvEndDuringNonStreamCall(t *testing.T) {
	started, canceled := make(chan struct{}, 1), make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		started <- struct{}{}
		<-r.Context().Done()
		canceled <- struct{}{}
	})
	g := newGW(t, aliasRetrying(2, "", openAIDep("d", "gpt-4o", up.URL)), nil)
	type result struct {
		resp *http.Response
		body string
	}
	done := make(chan result, 1)
	go func() {
		resp, b := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "ns1")
		done <- result{resp, b}
	}()
	awaitCh(t, started, "upstream start")
	resp, out := g.do("POST", "/v1/belay/runs/ns1/end", `{"status":"failed","error":"aborted"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("end: %d %s", resp.StatusCode, out)
	}
	awaitCh(t, canceled, "upstream cancel")
	r := <-done
	t.Logf("call: %d retry=%q attempts=%q %s", r.resp.StatusCode, r.resp.Header.Get("X-Should-Retry"), r.resp.Header.Get("X-Belay-Attempts"), r.body)
	if r.resp.StatusCode < 400 || r.resp.StatusCode >= 500 && r.resp.StatusCode != 503 {
		t.Errorf("call in flight at the end: %d", r.resp.StatusCode)
	}
	if r.resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("call canceled by its run's end: x-should-retry %q, want false (a retry gets 409 run_ended)", r.resp.Header.Get("X-Should-Retry"))
	}
	stored := g.run("ns1")
	e := decodeRun(t, out)
	t.Logf("end answered cost %d turns %d; stored cost %d turns %d", e.Run.Cost, e.Run.Turns, stored.Cost, stored.Turns)
	if stored.Cost == 0 {
		t.Errorf("a canceled call that reached the provider was not charged its estimated prompt")
	}
	if e.Run.Cost != stored.Cost {
		t.Errorf("end answered cost %d, stored %d", e.Run.Cost, stored.Cost)
	}
}

// After the end a call is refused 409 run_ended, in the caller's dialect,
// with x-should-retry false, nothing upstream and nothing charged.
func TestAdvCallAfterEnd(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(okCompletion, "%d", "10", 1), "%d", "5", 1))
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)) + "tenants: [{name: acme, key: vk-acme}]\n"
	g := newGW(t, y, nil)
	if resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "a1", "Authorization", "Bearer vk-acme"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	resp, out := g.do("POST", "/v1/belay/runs/a1/end", ``, "Authorization", "Bearer vk-acme")
	if resp.StatusCode != 200 {
		t.Fatalf("end: %d %s", resp.StatusCode, out)
	}
	before := g.run("acme~a1")
	n := calls.Load()
	for _, c := range []struct {
		path, body string
		hdr        []string
	}{
		{"/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, []string{"X-Belay-Run-Id", "a1", "Authorization", "Bearer vk-acme"}},
		{"/v1/chat/completions", `{"model":"m","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, []string{"X-Belay-Run-Id", "a1", "Authorization", "Bearer vk-acme"}},
		{"/v1/responses", `{"model":"m","max_output_tokens":50,"input":"hi"}`, []string{"X-Belay-Run-Id", "a1", "Authorization", "Bearer vk-acme"}},
	} {
		resp, out := g.do("POST", c.path, c.body, c.hdr...)
		t.Logf("%s: %d retry=%q %s", c.path, resp.StatusCode, resp.Header.Get("X-Should-Retry"), out)
		if resp.StatusCode != 409 || !strings.Contains(out, "run_ended") && !strings.Contains(out, "has ended") {
			t.Errorf("%s after the end: %d %s", c.path, resp.StatusCode, out)
		}
		if resp.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("%s: x-should-retry %q", c.path, resp.Header.Get("X-Should-Retry"))
		}
	}
	after := g.run("acme~a1")
	if calls.Load() != n || after.Cost != before.Cost || after.Turns != before.Turns || after.InputTokens != before.InputTokens {
		t.Errorf("after the end: %d upstream calls more, cost %d→%d, turns %d→%d", calls.Load()-n, before.Cost, after.Cost, before.Turns, after.Turns)
	}
}

// One tenant's key never reads or ends another's run, also when both
// name the same id; each tenant's end touches only its own.
func TestAdvTenantIsolation(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(okCompletion, "%d", "10", 1), "%d", "5", 1))
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)) + "tenants: [{name: acme, key: vk-acme}, {name: beta, key: vk-beta}] \n"
	g := newGW(t, y, nil)
	call := func(key, id string) {
		if resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", id, "Authorization", "Bearer "+key); resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", key, id, resp.StatusCode, out)
		}
	}
	call("vk-acme", "shared")
	call("vk-acme", "shared")
	resp, out := g.do("POST", "/v1/belay/runs/shared/end", `{"status":"failed","error":"beta"}`, "Authorization", "Bearer vk-beta")
	if resp.StatusCode != 404 {
		t.Errorf("beta ends acme's: %d %s", resp.StatusCode, out)
	}
	call("vk-beta", "shared")
	resp, out = g.do("POST", "/v1/belay/runs/shared/end", `{"status":"failed","error":"beta"}`, "Authorization", "Bearer vk-beta")
	if got := decodeRun(t, out); resp.StatusCode != 200 || got.Run.ID != "beta~shared" || got.Run.Turns != 1 {
		t.Errorf("beta ends its own: %d %s", resp.StatusCode, out)
	}
	resp, out = g.do("GET", "/v1/belay/runs/shared", ``, "Authorization", "Bearer vk-acme")
	if got := decodeRun(t, out); resp.StatusCode != 200 || got.Status != "running" || got.Run.Turns != 2 {
		t.Errorf("acme's after beta's end: %d %s", resp.StatusCode, out)
	}
}

// advFlakyStore fails its next failSaves run-record writes with an error that
// may pass (a locked database).
type advFlakyStore struct {
	*memstore.Store
	failSaves atomic.Int32
	ended     chan struct{}
}

var errLocked = errors.New("database is locked")

func (s *advFlakyStore) SaveRun(ctx context.Context, r store.Run, turns, cost budget.Scope) error {
	if s.failSaves.Add(-1) >= 0 {
		return errLocked
	}
	err := s.Store.SaveRun(ctx, r, turns, cost)
	if err == nil && r.Status != store.RunRunning && s.ended != nil {
		select {
		case s.ended <- struct{}{}:
		default:
		}
	}
	return err
}

func (s *advFlakyStore) UpdateRun(ctx context.Context, r store.Run) error {
	if s.failSaves.Add(-1) >= 0 {
		return errLocked
	}
	return s.Store.UpdateRun(ctx, r)
}

// An end whose record write fails once (and is retried in the
// background) must not answer 200 with the run still "running".
func TestAdvEndWithFlakyStoreWrite(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, strings.Replace(strings.Replace(okCompletion, "%d", "10", 1), "%d", "5", 1))
	})
	st := &advFlakyStore{Store: memstore.New(), ended: make(chan struct{}, 1)}
	g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)), st)
	if resp, out := g.do("POST", "/v1/chat/completions", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, "X-Belay-Run-Id", "f1"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	flushRuns(t, g.stack)
	st.failSaves.Store(1)
	resp, out := g.do("POST", "/v1/belay/runs/f1/end", `{"status":"failed","error":"x"}`)
	t.Logf("end: %d %s", resp.StatusCode, out)
	if resp.StatusCode == 200 {
		if a := decodeRun(t, out); a.Status != "failed" {
			t.Errorf("end answered 200 with status %q (want failed, or a retryable 503)", a.Status)
		}
	}
	resp, out = g.do("GET", "/v1/belay/runs/f1", "")
	t.Logf("get right after: %d %s", resp.StatusCode, out)
	if a := decodeRun(t, out); a.Status != "failed" {
		t.Errorf("GET right after the end: %q", a.Status)
	}
	flushRuns(t, g.stack)
	rec, _ := st.Store.GetRun(context.Background(), "f1")
	t.Logf("stored after Manager.Flush: %s", rec.Status)
	awaitCh(t, st.ended, "the background retry of the end's record")
	rec, _ = st.Store.GetRun(context.Background(), "f1")
	if rec.Status != store.RunFailed || rec.Error != "x" {
		t.Errorf("stored after the background retry: %s %q; want failed \"x\"", rec.Status, rec.Error)
	}
}

// On an open gateway (tenant "default"), POST /end of a stored run of
// another tenant (a Go agent's on the shared store) is 404 — and must not
// load it into the gateway and end it (its deadline passed).
func TestAdvEndOtherTenantRunOnOpenGateway(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	old := time.Now().Add(-time.Hour)
	if err := st.CreateRun(ctx, store.Run{ID: "agent-run", Tenant: "acme", Status: store.RunRunning, Started: old,
		Limits: store.Limits{Deadline: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, store.Run{ID: "agent-run-2", Tenant: "acme", Status: store.RunRunning, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	g := newGW(t, aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL)), st)
	resp, out := g.do("POST", "/v1/belay/runs/agent-run/end", `{"status":"failed"}`)
	t.Logf("end: %d %s", resp.StatusCode, out)
	if resp.StatusCode != 404 {
		t.Errorf("end of another tenant's run: %d", resp.StatusCode)
	}
	resp, out = g.do("GET", "/v1/belay/runs/agent-run", "")
	t.Logf("get: %d %s", resp.StatusCode, out)
	flushRuns(t, g.stack)
	rec, _ := st.GetRun(ctx, "agent-run")
	t.Logf("stored after: %s %s %q", rec.Status, rec.StopReason, rec.Error)
	if rec.Status != store.RunRunning {
		t.Errorf("a 404 end changed another tenant's run: %s %s", rec.Status, rec.StopReason)
	}
	resp, out = g.do("POST", "/v1/belay/runs/agent-run-2/end", `{"status":"failed"}`)
	t.Logf("end 2: %d %s; held=%v", resp.StatusCode, out, g.stack.Runs.Holds("agent-run-2"))
}
