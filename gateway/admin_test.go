package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store"
)

func (h *harness) admin(method, path, body, key string) (int, map[string]any) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.gw.URL+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func TestAdminAPI(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	c := h.openai()
	if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")},
		ooption.WithHeader("X-Belay-Run-Id", "adm-run"), ooption.WithHeader("X-Belay-Agent", "support")); err != nil {
		t.Fatal(err)
	}
	h.quiesce()
	if st, m := h.admin("GET", "/admin/runs", "", ""); st != 401 || !strings.HasPrefix(fmt.Sprint(m["error"]), "missing admin key: send the config's admin_key as Authorization: Bearer KEY") {
		t.Errorf("no key: %d %v", st, m)
	}
	if st, m := h.admin("GET", "/admin/runs", "", "wrong"); st != 401 || m["error"] != "invalid admin key" {
		t.Errorf("wrong key: %d %v", st, m)
	}
	st, m := h.admin("GET", "/admin/runs", "", "adm-key")
	if runs, _ := m["runs"].([]any); st != 200 || len(runs) != 1 {
		t.Fatalf("runs: %d %v", st, m)
	}
	for q, want := range map[string]int{"since=1h": 1, "since=7d&agent=support": 1} {
		st, m := h.admin("GET", "/admin/runs?"+q, "", "adm-key")
		if runs, _ := m["runs"].([]any); st != 200 || len(runs) != want {
			t.Errorf("runs?%s: %d %v; want %d runs", q, st, m, want)
		}
	}
	for q, says := range map[string]string{"since=yesterday": "since: want a time > 0", "since=0": "since: want a time > 0",
		"sinse=1h": `unknown parameter "sinse": want tenant, agent, status, since or limit`} {
		if st, m := h.admin("GET", "/admin/runs?"+q, "", "adm-key"); st != 400 || !strings.Contains(fmt.Sprint(m["error"]), says) {
			t.Errorf("runs?%s: %d %v; want 400 saying %q", q, st, m, says)
		}
	}
	// The tenant's spend in its period (newcomer finding, session 26).
	if st, m := h.admin("GET", "/admin/budgets", "", "adm-key"); st != 200 {
		t.Errorf("budgets: %d %v", st, m)
	} else if bs, _ := m["budgets"].([]any); len(bs) != 1 {
		t.Errorf("budgets: %v; want the default tenant's", m)
	} else if b, _ := bs[0].(map[string]any); b["tenant"] != "default" || b["spent_usd"] == "0" || b["limit_usd"] != "none" || b["period"] != "month" {
		t.Errorf("the default tenant's budget: %v; want some spend, no limit, by month", b)
	}
	for agent, want := range map[string]int{"support": 1, "billing": 0} {
		st, m := h.admin("GET", "/admin/runs?agent="+agent, "", "adm-key")
		if runs, _ := m["runs"].([]any); st != 200 || len(runs) != want {
			t.Errorf("runs?agent=%s: %d %v; want %d runs", agent, st, m, want)
		}
	}
	if err := h.stack.Recorder.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, m = h.admin("GET", "/admin/runs/adm-run", "", "adm-key")
	spans, _ := m["spans"].([]any)
	if st != 200 || len(spans) < 2 { // the run span, the model span, the attempt span
		t.Errorf("run: %d spans %d: %v", st, len(spans), m)
	}
	if st, _ := h.admin("GET", "/admin/runs/nope", "", "adm-key"); st != 404 {
		t.Errorf("unknown run: %d", st)
	}

	// Kill the run: its next turn is refused at once.
	if st, m := h.admin("POST", "/admin/kill", `{"target":"run","name":"adm-run","reason":"test"}`, "adm-key"); st != 200 {
		t.Fatalf("kill: %d %v", st, m)
	}
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")},
		ooption.WithHeader("X-Belay-Run-Id", "adm-run"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 || oe.Code != "killed" {
		t.Fatalf("after kill: %v", err)
	}
	// The flag stored is the one the answer showed (newcomer finding,
	// session 3: the answer said by "admin", the store the process name).
	if kills, _ := h.store.ListKills(ctx); len(kills) != 1 || kills[0].By != "admin" {
		t.Errorf("kills after an admin kill = %+v; want one, by admin", kills)
	}
	if st, _ := h.admin("POST", "/admin/kill", `{"target":"planet","name":"x"}`, "adm-key"); st != 400 {
		t.Errorf("bad target: %d", st)
	}
	// A run id neither stored nor held here is refused, as belay kill run
	// refuses it, unless forced (a flag may precede its run).
	if st, m := h.admin("POST", "/admin/kill", `{"target":"run","name":"no-such-run"}`, "adm-key"); st != 404 ||
		m["error"] != `no run "no-such-run" in the store nor held by this gateway; a gateway with tenants stores a client's run as TENANT~ID; send "force": true to set the flag anyway (a flag may be set before its run starts)` {
		t.Errorf("kill of an unknown run: %d %v", st, m)
	}
	if st, m := h.admin("POST", "/admin/kill", `{"target":"run","name":"no-such-run","force":true}`, "adm-key"); st != 200 {
		t.Errorf("forced kill of an unknown run: %d %v", st, m)
	}
	if st, _ := h.admin("DELETE", "/admin/kill?target=run&name=no-such-run", "", "adm-key"); st != 200 {
		t.Errorf("unkill: %d", st)
	}
	if st, _ := h.admin("GET", "/admin/runs?status=bogus", "", "adm-key"); st != 400 {
		t.Errorf("runs with an unknown status: %d, want 400", st)
	}
	if st, _ := h.admin("DELETE", "/admin/kill?target=run&name=adm-run", "", "adm-key"); st != 200 {
		t.Errorf("unkill: %d", st)
	}
	if st, _ := h.admin("POST", "/admin/tools/delete_db/disable", "", "adm-key"); st != 200 {
		t.Errorf("disable tool: %d", st)
	}
	kills, _ := h.store.ListKills(ctx)
	if len(kills) != 1 || kills[0].Target != store.KillTool || kills[0].Name != "delete_db" {
		t.Errorf("kills = %+v", kills)
	}

	// Approvals: list, approve, and a second decision conflicts.
	if err := h.store.CreateApproval(ctx, store.Approval{ID: "ap-1", RunID: "adm-run", Tool: "issue_refund", State: store.ApprovalPending}); err != nil {
		t.Fatal(err)
	}
	st, m = h.admin("GET", "/admin/approvals?state=pending", "", "adm-key")
	if list, _ := m["approvals"].([]any); st != 200 || len(list) != 1 {
		t.Fatalf("approvals: %d %v", st, m)
	}
	if st, m := h.admin("POST", "/admin/approvals/ap-1/approve", `{"by":"alice"}`, "adm-key"); st != 200 || m["state"] != "approved" || m["decided_by"] != "alice" {
		t.Errorf("approve: %d %v", st, m)
	}
	if st, m := h.admin("POST", "/admin/approvals/ap-1/deny", "", "adm-key"); st != 409 || m["error"] != "approval ap-1 is already approved by alice" {
		t.Errorf("second decision: %d %v; want 409 saying how it was decided, not in the store's words", st, m)
	}
	st, m = h.admin("GET", "/admin/breakers", "", "adm-key")
	if st != 200 || m["oa-1"] != "closed" {
		t.Errorf("breakers: %d %v", st, m)
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.openai()
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "gpt-4o-mini,mixed" { // the aliases served to OpenAI clients
		t.Errorf("models = %v", ids)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(h.gw.URL + p)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", p, resp, err)
		}
	}
	if _, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: userMsg("hi")}); err != nil {
		t.Fatal(err)
	}
	h.quiesce()
	body := scrape(t, h, "/metrics")
	for _, want := range []string{`belay_requests_total{dialect="openai",status="200"} 1`, `belay_attempts_total{deployment="oa-1",reason="ok"} 1`,
		`belay_request_duration_seconds_count{dialect="openai",stream="false"} 1`, `belay_spend_usd_total{tenant="default"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The admin API answers in its own shape, {"error": "..."}, also for a
// path or method it does not have, and says what was not found without
// the store's wording (newcomer finding).
func TestAdminErrorsInTheAdminShape(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/admin/kill", 405, "method GET is not allowed on /admin/kill (allowed: DELETE, POST)"},
		{"GET", "/admin/nope", 404, "no route for GET /admin/nope"},
		{"GET", "/admin/runs/nope", 404, `run "nope" not found`},
		{"POST", "/admin/approvals/nope/approve", 404, `approval "nope" not found`},
	} {
		st, m := h.admin(c.method, c.path, `{"by":"ada"}`, "adm-key")
		if msg, _ := m["error"].(string); st != c.status || msg != c.want {
			t.Errorf("%s %s: %d %v; want %d {\"error\": %q}", c.method, c.path, st, m, c.status, c.want)
		}
	}
}

// A kill of a model or deployment that this gateway's config does not
// serve is refused with 404, listing the names it serves, and sets no
// flag (newcomer finding: `belay kill model gtp-4o` set a flag that
// matched nothing). "force" sets it anyway; unkill clears any name.
func TestAdminKillUnservedName(t *testing.T) {
	h := newHarness(t, harnessOpts{extra: "  - alias: big\n    deployments:\n      - {name: big-1, provider: openai, model: gpt-4o, base_url: \"sim://\"}\n"})
	ctx := context.Background()
	const force = `; send "force": true to set the flag anyway (a gateway with another config, or a Go agent, sharing the store may serve it)`
	const models = "its models (aliases and provider model names) are gpt-4o-mini, claude-sonnet-5-5, mixed, big, gpt-4o"
	const deployments = "its deployments are oa-1, oa-2, an-1, an-2, big-1"
	for _, c := range []struct{ body, want string }{
		{`{"target":"model","name":"gtp-4o"}`, `no model named "gtp-4o" in the config test.yaml: ` + models + force},
		{`{"target":"model","name":"oa-1"}`, `no model named "oa-1" in the config test.yaml: ` + models + force},
		{`{"target":"deployment","name":"oa-3","reason":"typo"}`, `no deployment named "oa-3" in the config test.yaml: ` + deployments + force},
		{`{"target":"deployment","name":"gpt-4o"}`, `no deployment named "gpt-4o" in the config test.yaml: ` + deployments + force},
		{`{"target":"model","name":"gtp-4o","force":false}`, `no model named "gtp-4o" in the config test.yaml: ` + models + force},
		// Without tenants every call is the default tenant's (newcomer
		// finding: a tenant typo killed nothing, silently).
		{`{"target":"tenant","name":"acme"}`, `no tenant named "acme" in the config test.yaml: its tenants are default` + force},
	} {
		st, m := h.admin("POST", "/admin/kill", c.body, "adm-key")
		if st != http.StatusNotFound || m["error"] != c.want {
			t.Errorf("%s: %d %q\nwant 404 %q", c.body, st, m["error"], c.want)
		}
	}
	if kills, _ := h.store.ListKills(ctx); len(kills) != 0 {
		t.Fatalf("refused kills set flags: %+v", kills)
	}

	// Every name a flag can match is accepted: an alias, a provider model
	// name, a deployment.
	for _, body := range []string{`{"target":"model","name":"mixed"}`, `{"target":"model","name":"gpt-4o","reason":"runaway costs"}`, `{"target":"deployment","name":"an-2"}`} {
		if st, m := h.admin("POST", "/admin/kill", body, "adm-key"); st != 200 {
			t.Errorf("%s: %d %v", body, st, m)
		}
	}
	// The provider model name does match: alias big, served by gpt-4o only,
	// is refused.
	resp, body := h.post("/v1/chat/completions", `{"model":"big","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 403 || !strings.Contains(body, `"code":"killed"`) {
		t.Errorf("call to big after kill model gpt-4o: %d %s; want 403 killed", resp.StatusCode, body)
	}
	// The refusal names the flag and its reason (newcomer finding: a
	// model's kill said neither).
	if !strings.Contains(body, `disabled by a kill flag (model gpt-4o: runaway costs; undo with belay unkill)`) {
		t.Errorf("refusal %s does not name the flag and its reason", body)
	}

	// A body of the wrong types is named in JSON's words, not Go's.
	for _, c := range []struct{ body, want string }{
		{`{"target":"model","name":"gtp-4o","force":"yes"}`, "body: force: found a string; want true or false"},
		{`{"target":5,"name":"x"}`, "body: target: found a number; want a string"},
		{`{"target":"model","name":["a"]}`, "body: name: found an array; want a string"},
		// Malformed JSON is named as such, as the gateway's own endpoints
		// do (newcomer finding: "body: unexpected EOF").
		{`{"target":"model","name":"x"`, "request body is not valid JSON (cut short: it ends inside a value)"},
		{`{"target":"model" "name":"x"}`, "request body is not valid JSON (at byte 19: invalid character '\"' after object key:value pair)"},
	} {
		if st, m := h.admin("POST", "/admin/kill", c.body, "adm-key"); st != 400 || m["error"] != c.want {
			t.Errorf("%s: %d %q; want 400 %q", c.body, st, m["error"], c.want)
		}
	}

	// Forced: set although nothing here serves it.
	st, m := h.admin("POST", "/admin/kill", `{"target":"model","name":"gtp-4o","reason":"served by gateway b","force":true}`, "adm-key")
	if st != 200 || m["name"] != "gtp-4o" || m["reason"] != "served by gateway b" {
		t.Errorf("forced kill: %d %v", st, m)
	}
	kills, _ := h.store.ListKills(ctx)
	if len(kills) != 4 || !slices.ContainsFunc(kills, func(k store.Kill) bool { return k.Target == store.KillModel && k.Name == "gtp-4o" }) {
		t.Errorf("kills after a forced kill = %+v; want 4 with model gtp-4o", kills)
	}
	// Unkill takes any name that is set, served or not (the stale flag);
	// one never set is 404, naming the flags that are.
	if st, m := h.admin("DELETE", "/admin/kill?target=model&name=gtp-4o", "", "adm-key"); st != 200 {
		t.Errorf("unkill the stale flag: %d %v", st, m)
	}
	if st, m := h.admin("DELETE", "/admin/kill?target=deployment&name=never-set", "", "adm-key"); st != 404 ||
		m["error"] != "no kill flag deployment:never-set is set" || fmt.Sprint(m["set"]) != "[model:mixed model:gpt-4o deployment:an-2]" {
		t.Errorf("unkill a flag never set: %d %v", st, m)
	}
	if kills, _ := h.store.ListKills(ctx); len(kills) != 3 || slices.ContainsFunc(kills, func(k store.Kill) bool { return k.Name == "gtp-4o" }) {
		t.Errorf("kills after unkill = %+v; want 3, without gtp-4o", kills)
	}
}

// A tenant flag can match the config's tenants, or the default tenant of
// a config without any.
func TestKillNamesTenants(t *testing.T) {
	open := config.Default()
	if got := gateway.KillNames(open, store.KillTenant); len(got) != 1 || got[0] != gateway.DefaultTenant {
		t.Errorf("without tenants: %v; want [%s]", got, gateway.DefaultTenant)
	}
	cfg := config.Default()
	cfg.Tenants = []config.Tenant{{Name: "acme"}, {Name: "beta"}}
	if got := gateway.KillNames(cfg, store.KillTenant); strings.Join(got, ",") != "acme,beta" {
		t.Errorf("with tenants: %v; want [acme beta]", got)
	}
	if err := gateway.CheckKill(cfg, store.KillTenant, "acme"); err != nil {
		t.Errorf("acme: %v", err)
	}
	if err := gateway.CheckKill(cfg, store.KillTenant, "acem"); err == nil || err.Error() != `no tenant named "acem" in the default config: its tenants are acme, beta` {
		t.Errorf("acem: %v", err)
	}
}
