package trace

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// refundRun builds the spans of a small run: a model call that asks for a
// refund, the refund tool, a second model call. ids and times come from
// NewID and t0, so two calls give different ids and timestamps.
func refundRun(t0 time.Time, amount int64, extra ...string) []Span {
	run := RunSpan(NewTraceID(), "run-"+NewID(), "support", t0)
	m1 := ModelSpan(run, "gpt-4o", t0.Add(time.Millisecond))
	m1.SetAttr(AttrInputTokens, int64(120+amount)) // volatile
	m1.SetAttr(AttrCostUSD, 0.0012)                // volatile
	m1.SetAttr(AttrResponseID, "chatcmpl-"+NewID())
	a1 := AttemptSpan(m1, "openai/gpt-4o", 1, t0.Add(2*time.Millisecond))
	a1.SetAttr(AttrWaitMS, int64(amount*3))
	a1.Finish(t0.Add(40*time.Millisecond), nil)
	m1.Finish(t0.Add(41*time.Millisecond), nil)
	tool := ToolSpan(run, "issue_refund", t0.Add(50*time.Millisecond))
	tool.SetAttr(AttrToolCallID, "call_"+NewID())
	tool.SetAttr(AttrToolArguments, map[string]any{"amount": amount})
	tool.Finish(t0.Add(60*time.Millisecond), nil)
	spans := []Span{run, m1, a1, tool}
	next := t0.Add(70 * time.Millisecond)
	for _, name := range extra {
		s := ToolSpan(run, name, next)
		s.Finish(next.Add(time.Millisecond), nil)
		spans = append(spans, s)
		next = next.Add(10 * time.Millisecond)
	}
	m2 := ModelSpan(run, "gpt-4o", next)
	m2.AddEvent("breaker.closed", next, map[string]any{AttrDeployment: "openai/gpt-4o"})
	m2.Finish(next.Add(30*time.Millisecond), nil)
	run.Finish(next.Add(31*time.Millisecond), nil)
	spans[0] = run
	return append(spans, m2)
}

func TestCanonicalIgnoresIDsAndTimes(t *testing.T) {
	a := refundRun(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 10)
	b := refundRun(time.Date(2027, 5, 3, 9, 0, 0, 0, time.UTC), 10)
	// Store order differs from start order, and b was written twice.
	b[1], b[3] = b[3], b[1]
	b = append(b, b[2])
	ca, err := Canonical(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca, cb) {
		t.Fatalf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	want := `{"path":"0","kind":"run","name":"invoke_agent support","status":"ok","attrs":{"gen_ai.agent.name":"support","gen_ai.operation.name":"invoke_agent"}}
{"path":"0.0","kind":"model","name":"chat gpt-4o","status":"ok","attrs":{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-4o"}}
{"path":"0.0.0","kind":"attempt","name":"attempt openai/gpt-4o","status":"ok","attrs":{"belay.attempt":1,"belay.deployment":"openai/gpt-4o"}}
{"path":"0.1","kind":"tool","name":"execute_tool issue_refund","status":"ok","attrs":{"gen_ai.operation.name":"execute_tool","gen_ai.tool.call.arguments":{"amount":10},"gen_ai.tool.name":"issue_refund"}}
{"path":"0.2","kind":"model","name":"chat gpt-4o","status":"ok","attrs":{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-4o"},"events":[{"name":"breaker.closed","attrs":{"belay.deployment":"openai/gpt-4o"}}]}
`
	if string(ca) != want {
		t.Errorf("Canonical =\n%s\nwant\n%s", ca, want)
	}
	steps, err := ParseCanonical(ca)
	if err != nil || len(steps) != 5 || steps[3].Path != "0.1" {
		t.Errorf("ParseCanonical: %v, %+v", err, steps)
	}
}

func TestCanonicalKeepsConfiguredAttrs(t *testing.T) {
	spans := refundRun(time.Unix(0, 0), 10)
	c, err := CanonicalOptions{Volatile: []string{AttrResponseID, AttrToolCallID}}.Canonical(spans)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"gen_ai.usage.input_tokens":130`, `"belay.cost_usd":0.0012`, `"belay.wait_ms":30`} {
		if !strings.Contains(string(c), want) {
			t.Errorf("canonical form lacks %s:\n%s", want, c)
		}
	}
}

func TestCanonicalOrphansAndCycles(t *testing.T) {
	t0 := time.Unix(100, 0)
	spans := []Span{
		{SpanID: "c", ParentID: "gone", Kind: KindTool, Name: "execute_tool b", Start: t0},
		{SpanID: "x", ParentID: "y", Kind: KindModel, Name: "chat x", Start: t0.Add(2)},
		{SpanID: "y", ParentID: "x", Kind: KindModel, Name: "chat y", Start: t0.Add(1)},
		{SpanID: "d", Kind: KindTool, Name: "execute_tool a", Start: t0},
	}
	steps, err := CanonicalSteps(spans)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.Path+" "+s.Name)
	}
	want := "0 execute_tool a|1 execute_tool b|2 chat y|2.0 chat x"
	if strings.Join(got, "|") != want {
		t.Errorf("steps = %q, want %q", strings.Join(got, "|"), want)
	}
}

func TestCanonicalEncodingError(t *testing.T) {
	_, err := Canonical([]Span{{Name: "bad", Attrs: map[string]any{"ch": make(chan int)}}})
	if err == nil || !strings.Contains(err.Error(), "ch") {
		t.Errorf("err = %v, want an error naming the attribute", err)
	}
}

func TestDiff(t *testing.T) {
	t0 := time.Unix(0, 0)
	golden, err := CanonicalSteps(refundRun(t0, 10, "lookup_order"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := CanonicalSteps(refundRun(t0, 20, "send_email"))
	if err != nil {
		t.Fatal(err)
	}
	d := Diff(golden, got)
	want := `~ step 4 execute_tool issue_refund: gen_ai.tool.call.arguments {"amount":10} -> {"amount":20}
- step 5 execute_tool lookup_order
+ step 5 execute_tool send_email
`
	if d.String() != want {
		t.Errorf("Diff =\n%s\nwant\n%s", d, want)
	}
	if d.Equal() {
		t.Error("Equal() = true for different traces")
	}
	if d := Diff(golden, golden); !d.Equal() || d.String() != "" {
		t.Errorf("self diff = %q", d)
	}
}

func TestDiffStatusAttrsAndEvents(t *testing.T) {
	a := []Step{
		{Kind: KindModel, Name: "chat gpt-4o", Status: StatusOK, Attrs: map[string]any{"x": 1.0}},
		{Kind: KindTool, Name: "execute_tool a"},
	}
	b := []Step{
		{Kind: KindModel, Name: "chat gpt-4o", Status: StatusError, Attrs: map[string]any{"y": "v"},
			Events: []StepEvent{{Name: "breaker.open"}}},
		{Kind: KindTool, Name: "execute_tool a"},
		{Kind: KindTool, Name: "execute_tool b"},
	}
	want := `~ step 1 chat gpt-4o: status ok -> error
~ step 1 chat gpt-4o: x 1 -> (absent)
~ step 1 chat gpt-4o: y (absent) -> v
~ step 1 chat gpt-4o: events [] -> ["breaker.open"]
+ step 3 execute_tool b
`
	if got := Diff(a, b).String(); got != want {
		t.Errorf("Diff =\n%s\nwant\n%s", got, want)
	}
	if got := Diff(b, a).String(); !strings.HasSuffix(got, "- step 3 execute_tool b\n") {
		t.Errorf("reverse Diff =\n%s", got)
	}
}

func TestDiffAlignsAcrossInsertions(t *testing.T) {
	mk := func(names ...string) []Step {
		var s []Step
		for _, n := range names {
			s = append(s, Step{Kind: KindTool, Name: n})
		}
		return s
	}
	got := Diff(mk("a", "b", "c", "d", "e"), mk("a", "x", "c", "d", "y", "e")).String()
	want := "- step 2 b\n+ step 2 x\n+ step 5 y\n"
	if got != want {
		t.Errorf("Diff =\n%s\nwant\n%s", got, want)
	}
}

func TestDiffCanonicalBytes(t *testing.T) {
	a, _ := Canonical(refundRun(time.Unix(0, 0), 10))
	b, _ := Canonical(refundRun(time.Unix(5, 0), 10))
	d, err := DiffCanonical(a, b)
	if err != nil || !d.Equal() {
		t.Errorf("DiffCanonical = %v, %v; want equal", d, err)
	}
	if _, err := DiffCanonical([]byte("{not json\n"), a); err == nil {
		t.Error("DiffCanonical accepted a bad line")
	}
}

func ExampleDiff() {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	run := func(amount int, notify bool) []Span {
		root := RunSpan(NewTraceID(), "run-"+NewID(), "support", t0)
		chat := ModelSpan(root, "gpt-4o", t0.Add(time.Millisecond))
		refund := ToolSpan(root, "issue_refund", t0.Add(2*time.Millisecond))
		refund.SetAttr(AttrToolArguments, fmt.Sprintf(`{"amount":%d}`, amount))
		spans := []Span{root, chat, refund}
		if notify {
			spans = append(spans, ToolSpan(root, "send_email", t0.Add(3*time.Millisecond)))
		}
		return spans
	}
	golden, _ := Canonical(run(10, false))
	got, _ := Canonical(run(20, true))
	d, _ := DiffCanonical(golden, got)
	fmt.Print(d)
	// Output:
	// ~ step 3 execute_tool issue_refund: gen_ai.tool.call.arguments {"amount":10} -> {"amount":20}
	// + step 4 execute_tool send_email
}

func ExampleCanonical() {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	root := RunSpan(NewTraceID(), "run-"+NewID(), "support", t0)
	chat := ModelSpan(root, "gpt-4o", t0.Add(time.Millisecond))
	chat.SetAttr(AttrInputTokens, int64(812)) // volatile: left out
	chat.Finish(t0.Add(900*time.Millisecond), nil)
	lookup := ToolSpan(root, "lookup_order", t0.Add(time.Second))
	lookup.SetAttr(AttrToolCallID, "call_8f2k") // volatile: left out
	lookup.Finish(t0.Add(1100*time.Millisecond), nil)
	// Stored out of order; the canonical form is a tree ordered by start.
	out, err := Canonical([]Span{lookup, root, chat})
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// {"path":"0","kind":"run","name":"invoke_agent support","attrs":{"gen_ai.agent.name":"support","gen_ai.operation.name":"invoke_agent"}}
	// {"path":"0.0","kind":"model","name":"chat gpt-4o","status":"ok","attrs":{"gen_ai.operation.name":"chat","gen_ai.request.model":"gpt-4o"}}
	// {"path":"0.1","kind":"tool","name":"execute_tool lookup_order","status":"ok","attrs":{"gen_ai.operation.name":"execute_tool","gen_ai.tool.name":"lookup_order"}}
}

// Newcomer finding (session 2): two runs that did the same thing differed
// in every step whose captured messages carry the provider's random tool
// call ids, so golden traces failed runs that did nothing wrong.
func TestCanonicalRenumbersPayloadToolCallIDs(t *testing.T) {
	span := func(callID, answered string) []Span {
		in := `[{"role":"user","content":"refund A-1"},{"role":"assistant","tool_calls":[{"id":"` + callID +
			`","type":"function","function":{"name":"issue_refund","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` +
			answered + `","content":"ok"}]`
		out := `[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]`
		return []Span{{SpanID: "s", Kind: KindModel, Name: "chat m", Attrs: map[string]any{
			AttrInputMessages: in, AttrOutputMessages: out}}}
	}
	a, err := Canonical(span("call_AAA", "call_AAA"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Canonical(span("call_BBB", "call_BBB"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("runs differing only in tool call ids:\n%s\n%s", a, b)
	}
	if !bytes.Contains(a, []byte(`id-1`)) {
		t.Fatalf("ids not renumbered: %s", a)
	}
	// A result that answers another call than the one made still differs.
	c, err := Canonical(span("call_CCC", "call_DDD"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Fatal("a tool result answering another call compared equal")
	}
	// With ids not volatile, nothing is renumbered.
	d, err := CanonicalOptions{Volatile: []string{}}.Canonical(span("call_AAA", "call_AAA"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(d, []byte("call_AAA")) {
		t.Fatalf("ids renumbered although not volatile: %s", d)
	}
}

// A tool call's arguments compare as JSON: the same call written with
// other spacing, member order or number spelling is the same step; another
// amount, or arguments that are not one JSON document, differ (an
// adversarial review found a run unequal to its golden for spacing only).
func TestCanonicalToolArgumentsAsJSON(t *testing.T) {
	step := func(args string) string {
		t.Helper()
		b, err := Canonical([]Span{{SpanID: "s", Kind: KindTool, Name: "execute_tool issue_refund",
			Attrs: map[string]any{AttrToolName: "issue_refund", AttrToolArguments: args}}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	base := step(`{"order_id":"A-1002","amount_usd":50}`)
	for _, same := range []string{`{"amount_usd": 50, "order_id": "A-1002"}`, "{\n  \"order_id\": \"A-1002\",\n  \"amount_usd\": 50.0\n}"} {
		if step(same) != base {
			t.Errorf("%s is another step than %s:\n%s\n%s", same, `{"order_id":"A-1002","amount_usd":50}`, step(same), base)
		}
	}
	for _, other := range []string{`{"order_id":"A-1002","amount_usd":500}`, `{"order_id":"A-1002","amount_usd":50}]`, `not json`,
		`{"order_id":"A-1002","amount_usd":50.000000000000001}`} {
		if step(other) == base {
			t.Errorf("%s is the same step as the golden's", other)
		}
	}
	if !strings.Contains(base, `{\"amount_usd\":50,\"order_id\":\"A-1002\"}`) {
		t.Errorf("canonical arguments: %s", base)
	}
}

// A golden saved before tool arguments were canonical (their raw text in
// its line) still equals a run that makes the same call.
func TestOlderGoldenArgumentsCompareAsJSON(t *testing.T) {
	old := `{"path":"0","kind":"tool","name":"execute_tool issue_refund","attrs":{"gen_ai.tool.call.arguments":"{\"order_id\": \"A-1002\", \"amount_usd\": 50}","gen_ai.tool.name":"issue_refund"}}` + "\n"
	now, err := Canonical([]Span{{SpanID: "s", Kind: KindTool, Name: "execute_tool issue_refund",
		Attrs: map[string]any{AttrToolName: "issue_refund", AttrToolArguments: `{"amount_usd":50,"order_id":"A-1002"}`}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := DiffCanonical([]byte(old), now)
	if err != nil || !d.Equal() {
		t.Errorf("older golden against the same call: %v, %v:\n%s", err, d.String(), now)
	}
}

// Two order ids past 2^53 are two calls, not one float64 (review finding).
func TestCanonicalArgumentsKeepLargeIntegers(t *testing.T) {
	a, b := canonicalArguments(`{"order_id":9007199254740993}`), canonicalArguments(`{"order_id":9007199254740992}`)
	if a == b || a != `{"order_id":9007199254740993}` {
		t.Errorf("canonical arguments %s and %s", a, b)
	}
}
