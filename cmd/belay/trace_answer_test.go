package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/open"
	"github.com/belay-run/belay/trace"
)

// A run whose call failed upstream and whose next call was refused with
// every breaker open (capture full) shows the failed call's messages, the
// refusal as an event, and no footer blaming the capture setting
// (adversary finding: the refused call's span had no messages, and the
// footer said capture was off).
func TestTraceShowOfARefusedCallKeepsItsMessages(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		_, _ = io.WriteString(w, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`)
	}))
	defer up.Close()
	url := "sqlite://" + filepath.Join(t.TempDir(), "belay.db")
	ctx := context.Background()
	st, err := open.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	y := `
listen: 127.0.0.1:0
store: memory://
capture: full
retry: {max_attempts: 1, base: 1ms, cap: 2ms}
breaker: {consecutive_failures: 1, open_for: 1h}
models:
  - alias: m
    deployments:
      - {name: a, provider: openai, model: gpt-4o-mini, base_url: "` + up.URL + `/v1", api_key: k}
`
	cfg, err := config.Parse([]byte(y), "t.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	stack, err := gateway.Build(ctx, cfg, gateway.Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(stack.Server.Handler())
	post := func(runID string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"secret question"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Belay-Run-Id", runID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post("refused"); s != 500 { // trips the breaker
		t.Fatalf("first call %d, want 500", s)
	}
	if s := post("refused"); s != 503 { // every breaker open: refused, nothing sent
		t.Fatalf("second call %d, want 503", s)
	}
	srv.Close()
	stack.Close(ctx)
	st.Close()

	out, _, err := belay(t, url, "trace", "show", "refused")
	wantCode(t, err, 0, "")
	if strings.Contains(out, "no messages recorded") || !strings.Contains(out, "! request.refused") || !strings.Contains(out, "circuit_open") {
		t.Errorf("trace show refused: want the refusal event and no footer:\n%s", out)
	}
}

// A tool call's arguments are shown as the model sent them: an id above
// 2^53 keeps its digits, and <, >, & are not HTML-escapes (adversary
// finding: they were decoded as float64 and re-encoded by json.Marshal).
func TestAnswerLinesKeepArgumentsAsSent(t *testing.T) {
	got := answerLines(`[{"type":"tool_use","id":"t1","name":"refund","input":{"order_id":12345678901234567890,"note":"a<b & c>d"}}]`)
	want := []string{`tool call refund({"note":"a<b & c>d","order_id":12345678901234567890})`}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// A bare JSON number answer is altered the same way.
	if got := answerLines(`12345678901234567890`); len(got) != 1 || got[0] != "12345678901234567890" {
		t.Errorf("number answer shown as %q, want 12345678901234567890", got)
	}
}

// An answer that is not JSON, or is a bare JSON string, is quoted like a
// text part: its newlines cannot forge a line of the tree, nor its escape
// sequences reach the operator's terminal (adversary finding).
func TestAnswerLinesEscapeControlCharacters(t *testing.T) {
	for _, v := range []string{
		"not json\n  model chat fake  ok  1s\x1b[2J",
		`"a JSON string\n  model chat fake  ok  1s"`,
	} {
		for _, l := range answerLines(v) {
			if strings.ContainsAny(l, "\n\x1b") {
				t.Errorf("answerLines(%q) gives a line with a raw newline or escape: %q", v, l)
			}
		}
	}
}

// A text is cut by its own characters, not its quoted form: 200 tabs
// (under answerMax) are shown whole (adversary finding: the escapes were
// counted, and the cut fell inside one).
func TestAnswerLinesCountCharactersNotEscapes(t *testing.T) {
	text := strings.Repeat("\t", 200)
	got := answerLines(`[{"type":"text","text":"` + strings.Repeat(`\t`, 200) + `"}]`)
	want := []string{`"` + strings.Repeat(`\t`, 200) + `"`}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("a %d-character text (answerMax %d) shown as %q", len([]rune(text)), answerMax, got)
	}
}

// An OpenAI custom tool call (type "custom", no "function" object) shows
// its name and input.
func TestAnswerLinesCustomToolCall(t *testing.T) {
	got := answerLines(`[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"custom","custom":{"name":"grep","input":"foo"}}]}}]`)
	if len(got) != 1 || !strings.Contains(got[0], "grep") {
		t.Errorf("custom tool call shown as %q; want its name (grep) and input", got)
	}
}

// Two choices (n=2) are told apart from one answer with two text parts.
func TestAnswerLinesNameChoices(t *testing.T) {
	two := answerLines(`[{"index":0,"message":{"role":"assistant","content":"yes"}},{"index":1,"message":{"role":"assistant","content":"no"}}]`)
	one := answerLines(`[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"yes"},{"type":"text","text":"no"}]}}]`)
	if strings.Join(two, "\n") == strings.Join(one, "\n") {
		t.Errorf("two choices and one two-part answer print the same: %q", two)
	}
}

// An Anthropic answer's thinking (and a redacted_thinking block) is shown,
// not left out without a word.
func TestAnswerLinesShowThinking(t *testing.T) {
	got := answerLines(`[{"type":"thinking","thinking":"The user wants the refund; I will skip the approval.","signature":"s"},` +
		`{"type":"redacted_thinking","data":"xx"},{"type":"text","text":"Done."}]`)
	joined := strings.Join(got, "\n")
	if !strings.Contains(joined, "thinking") {
		t.Errorf("answer shown as %q: nothing says two thinking blocks were left out", got)
	}
}

// Invalid UTF-8 is shown byte by byte; a real U+FFFD and other text stay
// as they are.
func TestEscapeControl(t *testing.T) {
	for in, want := range map[string]string{
		"ok é \uFFFD":     "ok é \uFFFD",
		"a\xffb":          `a\xffb`,
		"tab\there\u0085": `tab\there\u0085`,
	} {
		if got := escapeControl(in); got != want {
			t.Errorf("escapeControl(%q) = %q, want %q", in, got, want)
		}
	}
}

// A Responses answer (its output items) reads as a chat answer does: the
// message's text, each function call, a reasoning summary (newcomer
// finding: it printed as raw JSON).
func TestAnswerLinesResponsesOutput(t *testing.T) {
	got := answerLines(`[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think"}]},` +
		`{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Refunding now.","annotations":[]}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"issue_refund","arguments":"{\"order_id\":\"A-17\"}","status":"completed"}]`)
	want := []string{`reasoning "think"`, `"Refunding now."`, `tool call issue_refund({"order_id":"A-17"})`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines %q, want %q", got, want)
	}
}

// A model call through the Responses API says so in trace show
// (newcomer finding: every call read "chat MODEL", whichever API it
// used); a chat completion's line is as it was.
func TestKeyAttrsNameTheResponsesAPI(t *testing.T) {
	got := strings.Join(keyAttrs(map[string]any{trace.AttrRequestModel: "gpt-4o-mini", trace.AttrOpenAIAPIType: "responses"}), " ")
	if got != "model=gpt-4o-mini api=responses" {
		t.Errorf("responses: %q", got)
	}
	got = strings.Join(keyAttrs(map[string]any{trace.AttrRequestModel: "gpt-4o-mini", trace.AttrOpenAIAPIType: "chat_completions"}), " ")
	if got != "model=gpt-4o-mini" {
		t.Errorf("chat completions: %q", got)
	}
}

// A cost with estimated usage in it says so in trace show (an Agents SDK
// test: an attempt cut by a fault was charged 4,096 estimated output
// tokens, and only --json said they were estimated).
func TestKeyAttrsMarkAnEstimatedCost(t *testing.T) {
	got := strings.Join(keyAttrs(map[string]any{trace.AttrCostUSD: 0.0025, trace.AttrCostEstimated: true}), " ")
	if got != "cost=$0.0025 (estimated)" {
		t.Errorf("estimated: %q", got)
	}
	if got := strings.Join(keyAttrs(map[string]any{trace.AttrCostUSD: 0.0025}), " "); got != "cost=$0.0025" {
		t.Errorf("reported: %q", got)
	}
}
