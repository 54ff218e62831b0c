package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/open"
	"github.com/belay-run/belay/trace"
)

var t0 = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// runTrace builds the spans of one run: a run span with a budget alert, a
// model call with a rate-limited attempt and a successful one, then a tool
// call that needed approval ap-1, with the given idempotency outcome.
func runTrace(runID, outcome string) []trace.Span {
	tid := "trace-" + runID
	run := trace.Span{TraceID: tid, SpanID: runID + "-run", RunID: runID, Kind: trace.KindRun, Name: "invoke_agent support",
		Start: t0, End: t0.Add(2500 * time.Millisecond), Status: trace.StatusError,
		Attrs: map[string]any{trace.AttrTenant: "acme", trace.AttrRunStatus: "stopped",
			trace.AttrStopReason: "budget_exceeded", trace.AttrFailureReason: "budget_exceeded", trace.AttrCostUSD: 0.0123,
			trace.AttrFailureMessage: "fatal: budget_exceeded: estimated cost $0.0009 does not fit the run's cost limit of $0.013"},
		Events: []trace.Event{{Name: "budget.alert", Time: t0.Add(2 * time.Second), Attrs: map[string]any{"scope": "run", "fraction": 0.8}}},
	}
	model := trace.Span{TraceID: tid, SpanID: runID + "-m1", ParentID: run.SpanID, RunID: runID, Kind: trace.KindModel, Name: "chat gpt-4o",
		Start: t0.Add(10 * time.Millisecond), End: t0.Add(1210 * time.Millisecond), Status: trace.StatusOK,
		Attrs: map[string]any{trace.AttrRequestModel: "gpt-4o", trace.AttrDeployment: "openai-b", trace.AttrAlias: "smart",
			trace.AttrInputTokens: int64(300), trace.AttrOutputTokens: int64(120), trace.AttrCostUSD: 0.0123}}
	a1 := trace.Span{TraceID: tid, SpanID: runID + "-a1", ParentID: model.SpanID, RunID: runID, Kind: trace.KindAttempt, Name: "attempt openai-a",
		Start: t0.Add(10 * time.Millisecond), End: t0.Add(310 * time.Millisecond), Status: trace.StatusError,
		Attrs: map[string]any{trace.AttrDeployment: "openai-a", trace.AttrAttempt: int64(1),
			trace.AttrFailureKind: "transient", trace.AttrFailureReason: "rate_limited", trace.AttrErrorType: "rate_limited",
			trace.AttrFailureMessage: "transient: rate_limited: Rate limit reached\x1b[2J\u202e"}}
	a2 := trace.Span{TraceID: tid, SpanID: runID + "-a2", ParentID: model.SpanID, RunID: runID, Kind: trace.KindAttempt, Name: "attempt openai-b",
		Start: t0.Add(400 * time.Millisecond), End: t0.Add(1200 * time.Millisecond), Status: trace.StatusOK,
		Attrs: map[string]any{trace.AttrDeployment: "openai-b", trace.AttrAttempt: int64(2), trace.AttrWaitMS: int64(90)}}
	tool := trace.Span{TraceID: tid, SpanID: runID + "-t1", ParentID: run.SpanID, RunID: runID, Kind: trace.KindTool, Name: "execute_tool issue_refund",
		Start: t0.Add(1300 * time.Millisecond), End: t0.Add(1320 * time.Millisecond), Status: trace.StatusOK,
		Attrs: map[string]any{trace.AttrToolName: "issue_refund", trace.AttrApproval: "ap-1",
			"belay.approval.state": "approved", trace.AttrToolOutcome: outcome, trace.AttrIdempotency: "k-" + runID}}
	return []trace.Span{run, model, a1, a2, tool}
}

// seed creates an SQLite store with runs r1 (stopped, tool executed) and r2
// (succeeded, tool replayed), their spans, and approval ap-1 pending. It
// returns the store URL.
func seed(t *testing.T) string {
	t.Helper()
	url := "sqlite://" + filepath.Join(t.TempDir(), "belay.db")
	ctx := context.Background()
	st, err := open.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs := []store.Run{
		{ID: "r1", Tenant: "acme", Agent: "support", Status: store.RunStopped, StopReason: "budget_exceeded",
			Started: t0, Ended: t0.Add(2500 * time.Millisecond), Turns: 2, ToolCalls: 1,
			InputTokens: 300, OutputTokens: 120, Cost: budget.Micros(12300)},
		{ID: "r2", Tenant: "globex", Agent: "support", Status: store.RunSucceeded,
			Started: t0.Add(time.Minute), Ended: t0.Add(time.Minute + 800*time.Millisecond), Turns: 1,
			InputTokens: 90, OutputTokens: 30, Cost: budget.Micros(450), CostEstimated: true},
	}
	for _, r := range runs {
		if err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	spans := append(runTrace("r1", trace.ToolExecuted), runTrace("r2", trace.ToolReplayed)...)
	if err := st.WriteSpans(ctx, spans); err != nil {
		t.Fatal(err)
	}
	ap := store.Approval{ID: "ap-1", RunID: "r1", Tenant: "acme", Tool: "issue_refund",
		Arguments: []byte(`{"order":"A-17","amount_usd":40}`), State: store.ApprovalPending, Requested: t0.Add(time.Second)}
	if err := st.CreateApproval(ctx, ap); err != nil {
		t.Fatal(err)
	}
	return url
}

// belay runs the real root command with args and --store url.
func belay(t *testing.T, url string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return belayArgs(t, append(args, "--store", url)...)
}

// belayArgs runs the real root command with args as they are.
func belayArgs(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// exitCode is the code main would exit with for err.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 2
}

func wantCode(t *testing.T, err error, code int, msg string) {
	t.Helper()
	if got := exitCode(err); got != code {
		t.Fatalf("exit %d (err %v), want %d", got, err, code)
	}
	if msg != "" && (err == nil || !strings.Contains(err.Error(), msg)) {
		t.Fatalf("error %v, want it to contain %q", err, msg)
	}
}

func wantLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestRuns(t *testing.T) {
	url := seed(t)
	out, _, err := belay(t, url, "runs")
	wantCode(t, err, 0, "")
	wantLines(t, out, "ID  ", "REASON", "r1  acme", "stopped", "budget_exceeded", "300/120", "$0.0123", "2.5s",
		"r2  globex", "succeeded", "$0.00045 (estimated)", "800ms")
	if strings.Contains(out, "$0.0123 (estimated)") {
		t.Errorf("r1's cost, from usage, is marked estimated:\n%s", out)
	}
	// Newest first.
	if strings.Index(out, "r2  ") > strings.Index(out, "r1  ") {
		t.Errorf("r2 should come before r1:\n%s", out)
	}

	out, _, err = belay(t, url, "runs", "--status", "stopped", "--json")
	wantCode(t, err, 0, "")
	var runs []store.Run
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(runs) != 1 || runs[0].ID != "r1" || runs[0].Cost != budget.Micros(12300) || runs[0].Turns != 2 {
		t.Errorf("--status stopped --json: %+v", runs)
	}

	out, _, err = belay(t, url, "runs", "--tenant", "globex")
	wantCode(t, err, 0, "")
	if strings.Contains(out, "r1  ") || !strings.Contains(out, "r2  ") {
		t.Errorf("--tenant globex:\n%s", out)
	}
	out, _, err = belay(t, url, "runs", "--agent", "support")
	wantCode(t, err, 0, "")
	wantLines(t, out, "r1  ", "r2  ")
	out, errOut, err := belay(t, url, "runs", "--agent", "billing")
	wantCode(t, err, 0, "")
	if strings.Contains(out, "r1  ") || strings.Contains(out, "r2  ") || !strings.Contains(errOut, `(no run has --agent "billing"; the newest runs have support)`) {
		t.Errorf("--agent billing:\n%s\nstderr %q", out, errOut)
	}
	// A slip of a name is pointed at (newcomer finding, session 26).
	_, errOut, err = belay(t, url, "runs", "--agent", "Support", "--tenant", "acmee")
	wantCode(t, err, 0, "")
	for _, want := range []string{`(no run has --tenant "acmee" (did you mean "acme"?); the newest runs have acme, globex)`,
		`(no run has --agent "Support" (did you mean "support"?); the newest runs have support)`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr %q lacks %q", errOut, want)
		}
	}
	_, _, err = belay(t, url, "runs", "--status", "exploded")
	wantCode(t, err, 2, "want running, succeeded, failed or stopped")

	// --since: r2 started a minute after r1.
	out, _, err = belay(t, url, "runs", "--since", time.Since(t0.Add(30*time.Second)).Round(time.Second).String())
	wantCode(t, err, 0, "")
	if strings.Contains(out, "r1  ") || !strings.Contains(out, "r2  ") {
		t.Errorf("--since, after r1's start:\n%s", out)
	}
	out, _, err = belay(t, url, "runs", "--since", "36500d")
	wantCode(t, err, 0, "")
	wantLines(t, out, "r1  ", "r2  ")
	_, _, err = belay(t, url, "runs", "--since", "0")
	wantCode(t, err, 2, "--since 0: want a time > 0")
	_, _, err = belay(t, url, "runs", "--since", "yesterday")
	wantCode(t, err, 2, `--since "yesterday": want a duration (720h) or a whole number of days (30d)`)

	// A list cut at --limit says so; one that is whole does not.
	out, errOut, err = belay(t, url, "runs", "--limit", "1")
	wantCode(t, err, 0, "")
	if !strings.Contains(out, "r2  ") || strings.Contains(out, "r1  ") || !strings.Contains(errOut, "older runs not shown") {
		t.Errorf("--limit 1: stdout\n%s\nstderr %q", out, errOut)
	}
	if _, errOut, _ := belay(t, url, "runs", "--limit", "2"); errOut != "" {
		t.Errorf("--limit 2 of 2 runs: stderr %q, want none", errOut)
	}
}

func TestTraceShow(t *testing.T) {
	url := seed(t)
	out, _, err := belay(t, url, "trace", "show", "r1")
	wantCode(t, err, 0, "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{
		"run r1  tenant acme  agent support  stopped (budget_exceeded)  turns 2  tool calls 1  tokens 300/120  cost $0.0123",
		"run invoke_agent support  error  2.5s  tenant=acme status=stopped stop_reason=budget_exceeded cost=$0.0123",
		"  x fatal: budget_exceeded: estimated cost $0.0009 does not fit the run's cost limit of $0.013",
		"  ! budget.alert +2s  fraction=0.8 scope=run",
		"  model chat gpt-4o (as smart)  ok  1.2s  model=gpt-4o deployment=openai-b tokens=300/120 cost=$0.0123",
		"    attempt openai-a  error  300ms  deployment=openai-a attempt=1 failure=rate_limited kind=transient",
		"      x transient: rate_limited: Rate limit reached\\x1b[2J\\u202e",
		"    attempt openai-b  ok  800ms  deployment=openai-b attempt=2 wait_ms=90",
		"  tool execute_tool issue_refund  ok  20ms  tool=issue_refund approval=ap-1 approval_state=approved outcome=executed",
		"(no messages recorded: a gateway records them unless its config says capture: off)",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("trace show r1:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}

	// The summary marks an estimated cost, as belay runs does.
	out, _, err = belay(t, url, "trace", "show", "r2")
	wantCode(t, err, 0, "")
	if first, _, _ := strings.Cut(out, "\n"); !strings.HasSuffix(first, "tokens 90/30  cost $0.00045 (estimated)") {
		t.Errorf("trace show r2: %q, want the cost marked estimated", first)
	}

	out, _, err = belay(t, url, "trace", "show", "r1", "--attrs")
	wantCode(t, err, 0, "")
	wantLines(t, out, "belay.idempotency_key=k-r1", `belay.failure.message=transient: rate_limited: Rate limit reached\x1b[2J\u202e`)
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Errorf("--attrs printed a control character raw:\n%q", out)
	}

	out, _, err = belay(t, url, "trace", "show", "r1", "--json")
	wantCode(t, err, 0, "")
	var spans []trace.Span
	if err := json.Unmarshal([]byte(out), &spans); err != nil || len(spans) != 5 || spans[0].SpanID != "r1-run" {
		t.Errorf("--json: %d spans, err %v", len(spans), err)
	}

	// A run whose model call recorded its messages (as the gateway does:
	// OpenAI choices, a JSON string) shows the answer under the call; one
	// without messages (r1) says how to keep them.
	m := runTrace("r2", trace.ToolReplayed)[1]
	m.Attrs[trace.AttrInputMessages] = `[{"role":"user","content":"refund order A-17"}]`
	m.Attrs[trace.AttrOutputMessages] = `[{"index":0,"message":{"role":"assistant","content":"I will refund it.",` +
		`"tool_calls":[{"id":"c1","type":"function","function":{"name":"issue_refund","arguments":"{\"order\":\"A-17\"}"}}]},"finish_reason":"tool_calls"}]`
	st, err := open.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	err = st.WriteSpans(context.Background(), []trace.Span{m})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _, err = belay(t, url, "trace", "show", "r2")
	wantCode(t, err, 0, "")
	wantLines(t, out, "  model chat gpt-4o (as smart)  ok  1.2s  model=gpt-4o deployment=openai-b tokens=300/120 cost=$0.0123\n"+
		"    < user \"refund order A-17\"\n"+
		"    > \"I will refund it.\"\n"+
		"    > tool call issue_refund({\"order\":\"A-17\"})\n"+
		"    attempt openai-a")
	if strings.Contains(out, "no messages recorded") {
		t.Errorf("r2 has messages, yet:\n%s", out)
	}

	_, _, err = belay(t, url, "trace", "show", "nope")
	wantCode(t, err, 1, "run nope not found (a call refused before it counted in a run, for its key, body or model, leaves none); a gateway with tenants stores a client's run as TENANT~ID")
}

// Newcomer finding (session 3): a running run's span, written when it
// started, printed tokens=0/0 cost=$0 under a header with its counts; it
// shows the record's counts until the run ends.
func TestTraceShowRunning(t *testing.T) {
	url := seed(t)
	ctx := context.Background()
	st, err := open.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	run := store.Run{ID: "live", Tenant: "acme", Status: store.RunRunning, Started: t0, Turns: 1,
		InputTokens: 24, OutputTokens: 86, Cost: budget.Micros(150)}
	span := trace.Span{TraceID: "t", SpanID: "live-run", RunID: "live", Kind: trace.KindRun, Name: "invoke_agent",
		Start: t0, Attrs: map[string]any{trace.AttrTenant: "acme", trace.AttrRunStatus: "running",
			trace.AttrInputTokens: int64(0), trace.AttrOutputTokens: int64(0), trace.AttrCostUSD: 0.0}}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteSpans(ctx, []trace.Span{span}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err := belay(t, url, "trace", "show", "live")
	wantCode(t, err, 0, "")
	wantLines(t, out, "run invoke_agent  -  open  tenant=acme status=running tokens=24/86 cost=$0.00015")

	// --json too (newcomer finding, session 4: its run span showed zeros).
	out, _, err = belay(t, url, "trace", "show", "live", "--json")
	wantCode(t, err, 0, "")
	var spans []map[string]any
	if err := json.Unmarshal([]byte(out), &spans); err != nil || len(spans) != 1 {
		t.Fatalf("--json: %v: %s", err, out)
	}
	a, _ := spans[0]["attrs"].(map[string]any)
	if a[trace.AttrInputTokens] != 24.0 || a[trace.AttrOutputTokens] != 86.0 || a["belay.run.turns"] != 1.0 ||
		a[trace.AttrCostUSD] != 0.00015 {
		t.Errorf("--json run span of a running run: %v; want the record's counts", a)
	}
}

func TestTraceDiff(t *testing.T) {
	url := seed(t)
	out, _, err := belay(t, url, "trace", "diff", "r1", "r1")
	wantCode(t, err, 0, "")
	wantLines(t, out, "no differences between r1 and r1")

	// r2 differs in the tool's outcome only; ids, times, tokens and cost
	// are not part of the canonical form.
	out, _, err = belay(t, url, "trace", "diff", "r1", "r2")
	wantCode(t, err, 1, "traces of r1 and r2 differ in 1 step")
	wantLines(t, out, "--- r1\n+++ r2\n~ step 5 execute_tool issue_refund: belay.tool.outcome executed -> replayed\n")

	// An unknown run is trouble (2), not a difference (1), as in diff(1).
	_, _, err = belay(t, url, "trace", "diff", "r1", "ghost")
	wantCode(t, err, 2, "run ghost not found")
}

func TestGolden(t *testing.T) {
	url := seed(t)
	out, _, err := belay(t, url, "trace", "golden", "save", "r1", "refund-path")
	wantCode(t, err, 0, "")
	wantLines(t, out, "saved golden refund-path from run r1 (5 steps)")

	out, errOut, err := belay(t, url, "trace", "golden", "show", "refund-path")
	wantCode(t, err, 0, "")
	canon, cerr := trace.Canonical(runTrace("r1", trace.ToolExecuted))
	if cerr != nil {
		t.Fatal(cerr)
	}
	if out != string(canon) {
		t.Errorf("golden show:\n%s\nwant the canonical trace of r1:\n%s", out, canon)
	}
	wantLines(t, errOut, "golden refund-path, from run r1, 5 steps")

	out, _, err = belay(t, url, "trace", "golden", "diff", "refund-path", "r2")
	wantCode(t, err, 1, "differ in 1 step")
	wantLines(t, out, "belay.tool.outcome executed -> replayed")
	_, _, err = belay(t, url, "trace", "golden", "diff", "refund-path", "r1")
	wantCode(t, err, 0, "")

	_, _, err = belay(t, url, "trace", "golden", "show", "missing")
	wantCode(t, err, 1, "golden missing not found in store sqlite://")
	_, _, err = belay(t, url, "trace", "golden", "diff", "missing", "r1")
	wantCode(t, err, 2, "(--store names the store the goldens were saved to)")
	_, _, err = belay(t, url, "trace", "golden", "diff", "refund-path", "ghost")
	wantCode(t, err, 2, "run ghost not found")

	// list and delete
	_, _, err = belay(t, url, "trace", "golden", "save", "r2", "replayed-path")
	wantCode(t, err, 0, "")
	out, _, err = belay(t, url, "trace", "golden", "list")
	wantCode(t, err, 0, "")
	wantLines(t, out, "NAME           RUN  BYTES", fmt.Sprintf("refund-path    r1   %d", len(canon)), "replayed-path  r2")
	out, _, err = belay(t, url, "trace", "golden", "delete", "refund-path")
	wantCode(t, err, 0, "")
	wantLines(t, out, "deleted golden refund-path")
	_, _, err = belay(t, url, "trace", "golden", "delete", "refund-path")
	wantCode(t, err, 1, "golden refund-path not found in store sqlite://")
	out, _, err = belay(t, url, "trace", "golden", "list")
	wantCode(t, err, 0, "")
	if strings.Contains(out, "refund-path ") || !strings.Contains(out, "replayed-path") {
		t.Errorf("golden list after a delete:\n%s", out)
	}
	_, _, err = belay(t, url, "trace", "golden", "list", "extra")
	wantCode(t, err, 2, "takes no arguments")
}

func TestApprovals(t *testing.T) {
	url := seed(t)
	out, _, err := belay(t, url, "approvals", "list")
	wantCode(t, err, 0, "")
	wantLines(t, out, "ap-1  r1   acme    issue_refund  pending", `{"order":"A-17","amount_usd":40}`)

	out, _, err = belay(t, url, "approvals", "approve", "ap-1", "--by", "alice", "--note", "refund checked")
	wantCode(t, err, 0, "")
	wantLines(t, out, "approval ap-1 approved by alice: issue_refund on run r1")

	_, _, err = belay(t, url, "approvals", "approve", "ap-1", "--by", "bob")
	wantCode(t, err, 1, "approval ap-1 is already approved by alice")
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("second decision: %v, want store.ErrConflict", err)
	}
	_, _, err = belay(t, url, "approvals", "deny", "ap-1")
	wantCode(t, err, 1, "already approved")

	out, _, err = belay(t, url, "approvals", "list")
	wantCode(t, err, 0, "")
	wantLines(t, out, "(no approvals)")
	out, _, err = belay(t, url, "approvals", "list", "--all", "--json")
	wantCode(t, err, 0, "")
	var as []store.Approval
	if err := json.Unmarshal([]byte(out), &as); err != nil || len(as) != 1 ||
		as[0].State != store.ApprovalApproved || as[0].DecidedBy != "alice" || as[0].Note != "refund checked" {
		t.Errorf("list --all --json: %+v, %v", as, err)
	}

	_, _, err = belay(t, url, "approvals", "deny", "ap-404")
	wantCode(t, err, 1, "approval ap-404 not found")
}

func TestKill(t *testing.T) {
	url := seed(t)
	out, _, err := belay(t, url, "kill", "tool", "issue_refund", "--reason", "refunds double-paid", "--by", "oncall")
	wantCode(t, err, 0, "")
	wantLines(t, out, "killed tool issue_refund")
	_, _, err = belay(t, url, "kill", "all")
	wantCode(t, err, 0, "")

	kills := listKillsIn(t, url)
	if len(kills) != 2 {
		t.Fatalf("kills %+v, want 2", kills)
	}
	i := slices.IndexFunc(kills, func(k store.Kill) bool { return k.Target == store.KillTool })
	if i < 0 || kills[i].Name != "issue_refund" || kills[i].Reason != "refunds double-paid" || kills[i].By != "oncall" || kills[i].At.IsZero() {
		t.Errorf("tool flag: %+v", kills)
	}
	out, _, err = belay(t, url, "kill")
	wantCode(t, err, 0, "")
	wantLines(t, out, "tool    issue_refund  refunds double-paid  oncall", "all     -")

	// A flag that is not set (a typo, the wrong target) is not taken
	// for a cleared one: exit 2, naming the flags that are set.
	_, _, err = belay(t, url, "unkill", "tool", "issue_refnd")
	wantCode(t, err, 2, `no kill tool "issue_refnd" is set; the flags set: tool "issue_refund", all`)
	_, _, err = belay(t, url, "unkill", "model", "issue_refund")
	wantCode(t, err, 2, `no kill model "issue_refund" is set`)
	out, _, err = belay(t, url, "unkill", "--ignore-absent", "model", "issue_refund")
	wantCode(t, err, 0, "")
	wantLines(t, out, `no kill model "issue_refund" was set`)

	out, _, err = belay(t, url, "unkill", "tool", "issue_refund")
	wantCode(t, err, 0, "")
	wantLines(t, out, "cleared kill tool issue_refund")
	_, _, err = belay(t, url, "unkill", "all")
	wantCode(t, err, 0, "")
	if kills := listKillsIn(t, url); len(kills) != 0 {
		t.Errorf("after unkill: %+v", kills)
	}
	_, _, err = belay(t, url, "unkill", "all")
	wantCode(t, err, 2, "no kill all is set; no kill flag is set")

	for _, args := range [][]string{{"kill", "planet", "earth"}, {"kill", "run"}, {"kill", "all", "x"}, {"unkill", "tenant"}} {
		_, _, err = belay(t, url, args...)
		wantCode(t, err, 2, "")
	}
}

// A run flag must name a run the store holds (newcomer finding: `belay
// kill run` took any id, silently); --force sets it anyway.
func TestKillChecksRun(t *testing.T) {
	url := seed(t)
	_, _, err := belay(t, url, "kill", "run", "r9")
	wantCode(t, err, 2, "")
	if want := `no run "r9" in the store ` + url + "; a gateway with tenants stores a client's run as TENANT~ID; pass --force to set the flag anyway (a run belay serve named itself is stored when its call ends)"; err.Error() != want {
		t.Errorf("kill run r9: %v\nwant %s", err, want)
	}
	if kills := listKillsIn(t, url); len(kills) != 0 {
		t.Fatalf("a refused kill set a flag: %+v", kills)
	}
	// A run that has ended gets its flag, and the answer says it stops
	// nothing now (newcomer finding, session 18).
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kill", "run", "r1"}, "killed run r1 (it had already ended, stopped: the flag stops nothing of it now; belay unkill run r1 clears it)\n"},
		{[]string{"kill", "run", "r2"}, "killed run r2 (it had already ended, succeeded: the flag stops nothing of it now; belay unkill run r2 clears it)\n"},
		{[]string{"kill", "run", "r9", "--force"}, "killed run r9\n"},
	} {
		out, _, err := belay(t, url, c.args...)
		wantCode(t, err, 0, "")
		if out != c.want {
			t.Errorf("%v printed %q; want %q", c.args, out, c.want)
		}
	}
	names := []string{}
	for _, k := range listKillsIn(t, url) {
		names = append(names, string(k.Target)+" "+k.Name)
	}
	slices.Sort(names)
	if got, want := strings.Join(names, ", "), "run r1, run r2, run r9"; got != want {
		t.Errorf("flags %s, want %s", got, want)
	}
}

// A model or deployment flag must name one the gateway's config serves
// (newcomer finding: `belay kill model gtp-4o` set a flag that matched
// nothing, silently); --force sets it anyway; unkill clears any name.
func TestKillChecksNames(t *testing.T) {
	url := seed(t)
	const force = " to set the flag anyway (a gateway with another config, or a Go agent, sharing the store may serve it)"

	// Without --config: the default config of belay serve.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kill", "model", "gtp-4o-mini"}, `no model named "gtp-4o-mini" in the default config: ` +
			"its models (aliases and provider model names) are gpt-4o-mini, claude-sonnet-5-5; pass the gateway's config (--config FILE), or --force" + force},
		{[]string{"kill", "deployment", "openai/gpt-4o-mini#2"}, `no deployment named "openai/gpt-4o-mini#2" in the default config: ` +
			"its deployments are openai/gpt-4o-mini#0, openai/gpt-4o-mini#1, anthropic/claude-sonnet-5-5#0, anthropic/claude-sonnet-5-5#1; pass the gateway's config (--config FILE), or --force" + force},
	} {
		_, _, err := belay(t, url, c.args...)
		wantCode(t, err, 2, "")
		if err.Error() != c.want {
			t.Errorf("%v: %v\nwant %s", c.args, err, c.want)
		}
	}
	if kills := listKillsIn(t, url); len(kills) != 0 {
		t.Fatalf("refused kills set flags: %+v", kills)
	}
	_, _, err := belay(t, url, "kill", "model", "claude-sonnet-5-5")
	wantCode(t, err, 0, "")

	// With --config: its names, and its store when --store is not given.
	// Its env: secrets need not be set.
	file := filepath.Join(t.TempDir(), "belay.yaml")
	y := "store: " + url + "\nmodels:\n  - alias: smart\n    deployments:\n" +
		"      - {provider: openai, model: gpt-4o, api_key: env:BELAY_TEST_UNSET_KEY}\n" +
		"      - {name: backup, provider: anthropic, model: claude-x, api_key: env:BELAY_TEST_UNSET_KEY}\n"
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = belayArgs(t, "kill", "model", "gpt-4", "--config", file)
	wantCode(t, err, 2, "")
	if want := `no model named "gpt-4" in the config ` + file + ": its models (aliases and provider model names) are smart, gpt-4o, claude-x; pass --force" + force; err.Error() != want {
		t.Errorf("kill model gpt-4: %v\nwant %s", err, want)
	}
	for _, args := range [][]string{
		{"kill", "model", "smart"},
		{"kill", "model", "gpt-4o"},
		{"kill", "deployment", "backup"},
		{"kill", "deployment", "openai/gpt-4o#0"},
		{"kill", "model", "gpt-4", "--force", "--reason", "served by gateway b"},
	} {
		out, _, err := belayArgs(t, append(args, "--config", file)...)
		wantCode(t, err, 0, "")
		wantLines(t, out, "killed "+args[1]+" "+args[2])
	}
	kills := listKillsIn(t, url)
	names := make([]string, 0, len(kills))
	for _, k := range kills {
		names = append(names, string(k.Target)+" "+k.Name)
	}
	slices.Sort(names)
	if got, want := strings.Join(names, ", "), "deployment backup, deployment openai/gpt-4o#0, model claude-sonnet-5-5, model gpt-4, model gpt-4o, model smart"; got != want {
		t.Errorf("flags %s\nwant %s", got, want)
	}

	// belay runs says which store it read when its command line does not
	// (a newcomer read the default ./belay.db, not his gateway's).
	if _, errOut, err := belayArgs(t, "runs", "--config", file); err != nil || errOut != "(runs of store "+url+" (of --config "+file+"))\n" {
		t.Errorf("runs --config: stderr %q, %v", errOut, err)
	}

	// Unkill takes any name that is set, served or not (the forced flag);
	// one never set is an error unless --ignore-absent.
	_, _, err = belayArgs(t, "unkill", "model", "gpt-4", "--config", file)
	wantCode(t, err, 0, "")
	_, _, err = belay(t, url, "unkill", "deployment", "never-set")
	wantCode(t, err, 2, `no kill deployment "never-set" is set`)
	_, _, err = belay(t, url, "unkill", "deployment", "never-set", "--ignore-absent")
	wantCode(t, err, 0, "")
	if kills := listKillsIn(t, url); len(kills) != 5 || slices.ContainsFunc(kills, func(k store.Kill) bool { return k.Name == "gpt-4" }) {
		t.Errorf("after unkill: %+v", kills)
	}

	// A config that is not valid is bad input, with its error.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("modles: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = belay(t, url, "kill", "model", "smart", "--config", bad)
	wantCode(t, err, 2, "config "+bad+": line 1: modles: unknown key (did you mean models?)")
}

func listKillsIn(t *testing.T, url string) []store.Kill {
	t.Helper()
	st, err := open.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ks, err := st.ListKills(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestStoreURLErrors(t *testing.T) {
	_, _, err := belay(t, "mysql://db/belay", "runs")
	wantCode(t, err, 2, "supported are sqlite://, postgres://")
	if !errors.Is(err, open.ErrScheme) {
		t.Errorf("err %v, want open.ErrScheme", err)
	}
	// A URL that names no store is bad input too.
	for _, url := range []string{"sqlite://", "memory://x"} {
		_, _, err = belay(t, url, "runs")
		wantCode(t, err, 2, "store/open: ")
		if !errors.Is(err, open.ErrURL) {
			t.Errorf("%s: err %v, want open.ErrURL", url, err)
		}
	}
	// A missing SQLite file is not created: a kill written there would
	// reach no gateway.
	missing := filepath.Join(t.TempDir(), "absent.db")
	_, _, err = belay(t, "sqlite://"+missing, "kill", "all")
	wantCode(t, err, 1, "absent.db")
}

// `belay serve` warns about a config that leaves runs without limits. A
// config without a limits section keeps the default limits (newcomer
// finding: a config with only admin_key removed them); limits: {} sets
// none.
func TestUnlimitedConfig(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want bool
	}{
		{"admin_key: k\n", false},
		{"limits: {}\n", true},
		{"limits: {max_turns: 5}\n", false},
		{"limits: {}\ntenants: [{name: a, key: k1, limits: {max_turns: 3}}]\n", false},
		{"limits: {}\ntenants: [{name: a, key: k1, limits: {max_turns: 3}}, {name: b, key: k2}]\n", true},
		{"tenants: [{name: a, key: k1, limits: {max_turns: 3}}, {name: b, key: k2}]\n", false},
	} {
		cfg, err := config.Parse([]byte(c.yaml), "t.yaml", func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		if got := unlimited(cfg); got != c.want {
			t.Errorf("%q: unlimited = %v, want %v", c.yaml, got, c.want)
		}
	}
}

func TestAnswerLines(t *testing.T) {
	long := strings.Repeat("é", answerMax+5)
	cases := []struct {
		name string
		v    any
		want []string
	}{
		{"anthropic content", `[{"type":"text","text":"Paris."},{"type":"tool_use","id":"t1","name":"lookup","input":{"q":"x"}}]`,
			[]string{`"Paris."`, `tool call lookup({"q":"x"})`}},
		{"openai parts and refusal", `[{"message":{"role":"assistant","content":[{"type":"text","text":"a"}],"refusal":"no"}}]`,
			[]string{`"a"`, `refusal "no"`}},
		{"opentelemetry parts, decoded", []any{map[string]any{"role": "assistant", "parts": []any{
			map[string]any{"type": "text", "content": "hi"}, map[string]any{"type": "tool_call", "name": "f", "arguments": map[string]any{"a": 1.0}}}}},
			[]string{`"hi"`, `tool call f({"a":1})`}},
		{"long text", `[{"type":"text","text":"` + long + `"}]`,
			[]string{`"` + strings.Repeat("é", answerMax) + `"… (5 more characters; --attrs prints all)`}},
		{"other shape", `{"odd":true}`, []string{`{"odd":true}`}},
		{"not JSON", `plain words`, []string{`"plain words"`}},
		{"absent", nil, nil},
		{"empty", "", nil},
	}
	for _, c := range cases {
		if got := answerLines(c.v); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// A wrong argument count or an unknown flag names the command and its
// usage line, and is bad input (exit 2).
func TestUsageErrorsNameTheCommand(t *testing.T) {
	url := seed(t)
	_, _, err := belay(t, url, "trace", "show")
	wantCode(t, err, 2, "belay trace show: accepts 1 arg(s), received 0 (usage: belay trace show RUN [flags])")
	_, _, err = belay(t, url, "trace", "diff", "a")
	wantCode(t, err, 2, "usage: belay trace diff A B")
	_, _, err = belay(t, url, "runs", "--colour")
	wantCode(t, err, 2, "belay runs: unknown flag: --colour (usage: belay runs [flags]; belay runs --help for its flags)")
}

// A mistyped subcommand of a group is a usage error (exit 2) naming it,
// with a suggestion; a command that takes no arguments says so (adversary
// and newcomer findings: `belay trace shwo r1` printed help and exited 0,
// `belay runs extra` said "unknown command").
func TestUsageErrorsOfGroups(t *testing.T) {
	_, _, err := belayArgs(t, "trace", "shwo", "r1")
	wantCode(t, err, 2, `unknown command "shwo" for "belay trace"; did you mean show? (its commands: diff, golden, show)`)
	_, _, err = belayArgs(t, "trace", "golden", "sav", "r1", "g")
	wantCode(t, err, 2, `unknown command "sav" for "belay trace golden"; did you mean save?`)
	_, _, err = belayArgs(t, "runs", "extra")
	wantCode(t, err, 2, `belay runs takes no arguments but a command (prune); got "extra" (usage: belay runs [flags])`)
	_, _, err = belayArgs(t, "approvals", "list", "extra")
	wantCode(t, err, 2, `belay approvals list takes no arguments; got "extra"`)
	out, _, err := belayArgs(t, "trace")
	wantCode(t, err, 0, "")
	wantLines(t, out, "Available Commands:", "golden")
}

// A newcomer's slips when starting the gateway get hints (newcomer
// findings): a flag named as other tools name it, a port without a host,
// an eval suite given as the config, an unknown store scheme.
func TestServeSlipsGetHints(t *testing.T) {
	_, _, err := belayArgs(t, "serve", "--port", "4001")
	wantCode(t, err, 2, "unknown flag: --port; did you mean --listen?")
	_, _, err = belayArgs(t, "serve", "--listen", "4099")
	wantCode(t, err, 2, `--listen "4099" is not host:port (e.g. 127.0.0.1:4000, or :4000 for every interface)`)
	_, _, err = belayArgs(t, "serve", "--config", "../../examples/refund-agent/suite.yaml")
	wantCode(t, err, 2, "looks like an eval suite, with scenarios: run it with belay eval ../../examples/refund-agent/suite.yaml")
	_, _, err = belayArgs(t, "serve", "--store", "foo://x", "--listen", "127.0.0.1:0")
	wantCode(t, err, 2, "supported are sqlite://, postgres://, postgresql://, memory:// and a bare file path")

	// A config file without models (newcomer finding: it served the
	// simulator, and the startup line stopped saying so).
	noModels := filepath.Join(t.TempDir(), "only.yaml")
	if err := os.WriteFile(noModels, []byte("listen: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := belayArgs(t, "serve", "--config", noModels, "--store", "foo://x")
	wantCode(t, err, 2, `unsupported store URL scheme "foo://"`)
	if want := noModels + " has no models: the built-in simulator answers gpt-4o-mini and claude-sonnet-5-5"; !strings.Contains(stderr, want) {
		t.Errorf("stderr = %q, want the warning %q", stderr, want)
	}
}

// belay runs shows a failed run's failure reason beside stopped runs' stop
// reasons (newcomer finding: a failed run showed "-"), and for an error
// that names none (a command agent's) its first clause, not "error".
func TestRunReason(t *testing.T) {
	for _, c := range []struct {
		r    store.Run
		want string
	}{
		{store.Run{Status: store.RunStopped, StopReason: "budget_exceeded"}, "budget_exceeded"},
		{store.Run{Status: store.RunFailed, Error: "transient: connection_error from unreachable: upstream deployment unreachable: connection reset"}, "connection_error"},
		{store.Run{Status: store.RunFailed, Error: "degraded: circuit_open: every deployment ..."}, "circuit_open"},
		{store.Run{Status: store.RunFailed, Error: "permanent: context_length_exceeded (HTTP 400) from a: too long"}, "context_length_exceeded"},
		{store.Run{Status: store.RunFailed, Error: "agent exited non-zero; its stderr ended: Traceback ..."}, "agent exited non-zero"},
		{store.Run{Status: store.RunFailed, Error: "agent timed out after 30s\nkilled"}, "agent timed out after 30s"},
		{store.Run{Status: store.RunFailed, Error: "the agent   ended\twithout an exit status"}, "the agent ended without an exit status"},
		{store.Run{Status: store.RunFailed, Error: "agent panicked: runtime error: index out of range [3] with length 3"}, "agent panicked: runtime error: index ou…"},
		{store.Run{Status: store.RunFailed, Error: " ; rest"}, "error"},
		{store.Run{Status: store.RunSucceeded}, ""},
	} {
		if got := runReason(c.r); got != c.want {
			t.Errorf("runReason(%q, %q) = %q, want %q", c.r.StopReason, c.r.Error, got, c.want)
		}
	}
}

func TestPromptLine(t *testing.T) {
	for _, c := range []struct {
		name string
		v    any
		want string
	}{
		{"openai", `[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]`, `user "a b"`},
		{"openai tool result", `[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"{\"ok\":true}"}]`, `tool result "{\"ok\":true}"`},
		{"anthropic", `{"system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"42"}]}]}`, `tool result "42"`},
		{"newline", `[{"role":"user","content":"a\nb"}]`, `user "a\nb"`},
		{"responses string", `"hello there"`, `user "hello there"`},
		{"responses instructions", `{"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`, `user "a b"`},
		{"responses tool output", `[{"role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"18 C"}]`, `tool result "18 C"`},
		{"parallel tool results, chat", `[{"role":"user","content":"x"},{"role":"assistant","content":null},{"role":"tool","tool_call_id":"a","content":"18 C"},{"role":"tool","tool_call_id":"b","content":"14:05"}]`, `tool result "18 C 14:05"`},
		{"parallel tool results, responses", `[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"a","output":"18 C"},{"type":"function_call_output","call_id":"b","output":"14:05"}]`, `tool result "18 C 14:05"`},
		{"none", `[]`, ""},
		{"absent", nil, ""},
	} {
		if got := promptLine(c.v); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// --config names the store of a gateway's config, for runs and trace as
// for kill (newcomer finding: only kill took it); --store still wins.
func TestOpsReadTheConfigsStore(t *testing.T) {
	url := seed(t)
	cfg := filepath.Join(t.TempDir(), "belay.yaml")
	if err := os.WriteFile(cfg, []byte("store: "+url+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := belayArgs(t, "runs", "--config", cfg)
	wantCode(t, err, 0, "")
	wantLines(t, out, "r1  acme", "r2  globex")
	out, _, err = belayArgs(t, "trace", "show", "r1", "--config", cfg)
	wantCode(t, err, 0, "")
	wantLines(t, out, "r1")
	_, _, err = belayArgs(t, "runs", "--config", cfg, "--store", "sqlite://"+filepath.Join(t.TempDir(), "none.db"))
	wantCode(t, err, 1, "none.db")
	_, _, err = belayArgs(t, "runs", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	wantCode(t, err, 2, "missing.yaml")
}

// belay runs prune deletes the runs that ended more than AGE ago, with
// their spans; a young run stays, and an age under an hour, or not an
// age, is refused.
func TestRunsPrune(t *testing.T) {
	url := seed(t) // r1 and r2 ended on 2026-11-29
	ctx := context.Background()
	st, err := open.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	young := store.Run{ID: "young", Tenant: "acme", Status: store.RunSucceeded, Started: time.Now().Add(-time.Minute), Ended: time.Now()}
	if err := st.CreateRun(ctx, young); err != nil {
		t.Fatal(err)
	}
	st.Close()

	for _, c := range []struct{ arg, says string }{
		{"30m", "want at least 1h ("},
		{"106751d", "want at most 36500 days"},
		{"99999999999999999999d", "want at most 36500 days"},
		{"soon", "want a duration (720h) or a whole number of days (30d)"},
		{"-2d", "want a duration (720h) or a whole number of days (30d)"},
	} {
		_, _, err := belay(t, url, "runs", "prune", "--older-than", c.arg)
		wantCode(t, err, 2, c.says)
	}
	out, _, err := belay(t, url, "runs", "prune", "--older-than", "1d", "--batch", "1")
	wantCode(t, err, 0, "")
	if !strings.HasPrefix(out, "pruned 2 runs that ended before ") {
		t.Errorf("prune: %q", out)
	}
	out, _, err = belay(t, url, "runs")
	wantCode(t, err, 0, "")
	if strings.Contains(out, "r1  ") || strings.Contains(out, "r2  ") || !strings.Contains(out, "young") {
		t.Errorf("runs after the prune:\n%s", out)
	}
	_, _, err = belay(t, url, "trace", "show", "r1")
	wantCode(t, err, 1, "run r1 not found")
	st, err = open.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if spans, err := st.RunSpans(ctx, "r2"); err != nil || len(spans) != 0 {
		t.Errorf("spans of a pruned run: %d, %v", len(spans), err)
	}
	if a, err := st.GetApproval(ctx, "ap-1"); err != nil || a.RunID != "r1" {
		t.Errorf("approval of a pruned run: %+v, %v; want it kept", a, err)
	}
}

// A store URL's password is not shown in messages (a second review: the
// new "runs of store" line, and the errors, printed it).
func TestStoreURLRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://belay:s3cretpw@127.0.0.1:5432/belay?sslmode=disable": "postgres://belay:xxxxx@127.0.0.1:5432/belay?sslmode=disable",
		"postgres://root@127.0.0.1:5432/test":                            "postgres://root@127.0.0.1:5432/test",
		"sqlite://belay.db":                                              "sqlite://belay.db",
		"memory://":                                                      "memory://",
		// A third review: a password with a stray % (the URL does not
		// parse), and one given as a parameter.
		"postgres://u:s3cr%zzet@127.0.0.1:1/db":           "postgres://xxxxx@127.0.0.1:1/db",
		"postgres://u@127.0.0.1:1/db?password=s3cret&x=1": "postgres://u@127.0.0.1:1/db?password=xxxxx&x=1",
		"postgres://u@h:1/db?x=%zz&password=s3cret":       "postgres://u@h:1/db?xxxxx",
	} {
		if got := open.Redacted(in); got != want {
			t.Errorf("open.Redacted(%q) = %q, want %q", in, got, want)
		}
	}
	_, _, err := belayArgs(t, "runs", "--store", "postgres://belay:s3cretpw@127.0.0.1:1/belay?connect_timeout=1")
	if err == nil || strings.Contains(err.Error(), "s3cretpw") {
		t.Errorf("runs against an unreachable store: %v", err)
	}
}

// A tool flag near a name of the config's tools, matching none, is most
// likely a typo: refused, naming the near one, unless --force (newcomer
// finding, session 26: `kill tool issue_refnd` was set, and issue_refund
// ran on). A tool the config does not name at all is taken.
func TestKillToolTypo(t *testing.T) {
	url := seed(t)
	file := filepath.Join(t.TempDir(), "belay.yaml")
	if err := os.WriteFile(file, []byte("store: "+url+"\ntools: {irreversible: [issue_refund, send_*]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := belayArgs(t, "kill", "tool", "issue_refnd", "--config", file)
	wantCode(t, err, 2, `tool "issue_refnd" is not named in the config's tools (did you mean "issue_refund"?); pass --force`)
	for _, args := range [][]string{
		{"kill", "tool", "issue_refund"},
		{"kill", "tool", "send_email"},   // a pattern's match
		{"kill", "tool", "lookup_order"}, // not near any name
		{"kill", "tool", "issue_refnd", "--force"},
	} {
		out, _, err := belayArgs(t, append(args, "--config", file)...)
		wantCode(t, err, 0, "")
		wantLines(t, out, "killed tool "+args[2])
	}
}

// A run whose calls were all refused before any reached a provider says
// so, not that capture is off (newcomer finding, session 26).
func TestTraceShowRefusedOnly(t *testing.T) {
	url := "sqlite://" + filepath.Join(t.TempDir(), "refused.db")
	st, err := open.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateRun(ctx, store.Run{ID: "refused", Tenant: "acme", Status: store.RunStopped, StopReason: "budget_exceeded", Started: at, Ended: at}))
	must(st.WriteSpans(ctx, []trace.Span{{TraceID: "t1", SpanID: "s1", RunID: "refused", Kind: trace.KindModel, Name: "chat gpt-4o-mini",
		Start: at, End: at, Status: trace.StatusError, Attrs: map[string]any{trace.AttrErrorType: "budget_exceeded"}}}))
	must(st.Close())
	out, _, err := belay(t, url, "trace", "show", "refused")
	wantCode(t, err, 0, "")
	if !strings.Contains(out, "(no messages: no call of the run reached a provider)") || strings.Contains(out, "capture: off") {
		t.Errorf("trace show of a run refused at once:\n%s", out)
	}
}

// belay budgets shows each tenant's spend in its current period, from the
// ledger (newcomer finding, session 26: nothing showed a tenant's spend
// but a refusal).
func TestBudgets(t *testing.T) {
	dir := t.TempDir()
	url := "sqlite://" + filepath.Join(dir, "budgets.db")
	st, err := open.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	spend := func(id string, scope budget.Scope, usd budget.USD, spent bool) {
		t.Helper()
		r := budget.Reservation{ID: id, Amount: usd, Spend: spent, Scopes: []budget.ScopeLimit{{Scope: scope}}, ExpiresAt: now.Add(time.Hour)}
		if err := st.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	spend("s1", budget.TenantScope("acme", budget.Day, now), budget.Micros(250_000), true)
	spend("h1", budget.TenantScope("acme", budget.Day, now), budget.Micros(100_000), false)
	spend("s2", budget.TenantScope("globex", budget.Month, now), budget.Micros(1_500), true)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := writeText(t, dir, "belay.yaml", "store: "+url+"\ntenants:\n"+
		"  - {name: acme, key: env:ACME_KEY, budget: {usd: \"1.00\", period: day}}\n"+
		"  - {name: globex, key: env:GLOBEX_KEY}\n")
	out, _, err := belayArgs(t, "budgets", "--config", cfg)
	wantCode(t, err, 0, "")
	day := budget.Day.End(now).Format(time.RFC3339)
	month := budget.Month.End(now).Format(time.RFC3339)
	wantLines(t, out, "TENANT  PERIOD  SPENT    HELD   LIMIT  LEFT   ENDS", "acme    day     $0.25    $0.10  $1.00  $0.65  "+day,
		"globex  month   $0.0015  $0.00  none   none   "+month)
	out, _, err = belayArgs(t, "budgets", "--config", cfg, "--json")
	wantCode(t, err, 0, "")
	var bs []gateway.BudgetStatus
	if err := json.Unmarshal([]byte(out), &bs); err != nil || len(bs) != 2 || bs[0].SpentUSD != "0.25" || bs[0].HeldUSD != "0.10" ||
		bs[0].LeftUSD != "0.65" || bs[1].LimitUSD != "none" {
		t.Errorf("--json: %v %+v", err, bs)
	}
}
