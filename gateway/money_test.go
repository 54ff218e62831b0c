package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// An answer past max_upstream_body_bytes was generated, and billed by the
// provider, in full; without max_tokens it is charged the output the call
// reserved (an adversarial review found it charged no output at all).
func TestOverLimitAnswerChargedItsOutput(t *testing.T) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = 'x'
	}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":16384}}`, big)
	})
	g := newGW(t, aliasRetrying(1, "max_upstream_body_bytes: 16384\n", openAIDep("d", "gpt-4o", up.URL)), nil)
	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"write a lot"}]}`, "X-Belay-Run-Id", "over-limit")
	if resp.StatusCode == 200 {
		t.Fatalf("status 200: %s", b)
	}
	rec := g.run("over-limit")
	if rec.OutputTokens != gateway.DefaultReserveOutputTokens {
		t.Errorf("a %d-byte answer past the cap was charged %d output tokens (cost %s, header %q); want the reserved %d",
			len(big), rec.OutputTokens, rec.Cost, resp.Header.Get("X-Belay-Cost-Usd"), gateway.DefaultReserveOutputTokens)
	}
}

// An attempt on the dear deployment (gpt-4o) that used tokens and failed
// (a 2xx answer without "choices": charged, estimated), then a fallback
// served by the cheap one (gpt-4o-mini): each attempt is priced at the
// deployment that used its tokens (an adversarial review found the sum
// priced at the last deployment's price).
func TestFallbackChargesPricedPerDeployment(t *testing.T) {
	dear := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		// 200 with usage but no choices: answerFault → charged as an
		// estimate of the prompt and the body's length, ServerError.
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","usage":{"prompt_tokens":1000000,"completion_tokens":0}}`)
	})
	cheap := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, aliasRetrying(1, "", openAIDep("dear", "gpt-4o", dear.URL), openAIDep("cheap", "gpt-4o-mini", cheap.URL)), nil)
	// A long prompt, so the failed attempt's estimated prompt dominates.
	msg := make([]byte, 40000)
	for i := range msg {
		msg[i] = 'a' + byte(i%26)
		if i%7 == 6 {
			msg[i] = ' '
		}
	}
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"` + string(msg) + `"}]}`
	resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "fallback-priced")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Belay-Attempts") != "2" {
		t.Fatalf("attempts %q; want 2 (dear failed, cheap served)", resp.Header.Get("X-Belay-Attempts"))
	}
	got, err := budget.ParseUSD(resp.Header.Get("X-Belay-Cost-Usd"))
	if err != nil {
		t.Fatal(err)
	}
	p := budget.DefaultPricing()
	servedCost, _ := p.Cost("openai", "gpt-4o-mini", budget.Usage{InputTokens: 10, OutputTokens: 5})
	// The dear attempt is charged at least its estimated prompt, at gpt-4o's price.
	rec := g.run("fallback-priced")
	prompt := rec.InputTokens - 10
	if prompt <= 0 {
		t.Fatalf("failed attempt not charged at all: input tokens %d", rec.InputTokens)
	}
	dearMin, _ := p.Cost("openai", "gpt-4o", budget.Usage{InputTokens: prompt})
	if got < servedCost+dearMin {
		t.Errorf("x-belay-cost-usd %s (record %s); want ≥ %s: the failed attempt's %d prompt tokens were used on gpt-4o (≥ %s) but priced at gpt-4o-mini",
			got, rec.Cost, servedCost+dearMin, prompt, dearMin)
	}
}

// A call whose failed attempts used tokens is retried only while what they
// used and the next attempt's estimate fit the run's cost limit: the
// money for each retry is held before it is made (an adversarial review:
// a $0.03 run was charged $0.08 over four attempts). The call then fails
// with budget_exceeded, naming the attempt's failure, and the run's cost
// stays within its limit.
func TestRetriesHeldWithinTheRunsCostLimit(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		// 200 without choices: a transient failure, charged its prompt.
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","usage":{"prompt_tokens":1000,"completion_tokens":0}}`)
	})
	g := newGW(t, aliasRetrying(4, "", openAIDep("d", "gpt-4o", up.URL)), nil)
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("many words here ", 2000) + `"}]}`
	// Unbounded but for the gateway's $5: four attempts, each charged.
	resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "probe")
	if resp.StatusCode == 200 || resp.Header.Get("X-Belay-Attempts") != "4" {
		t.Fatalf("probe: status %d, attempts %q; want a failure after 4: %s", resp.StatusCode, resp.Header.Get("X-Belay-Attempts"), b)
	}
	probe := g.run("probe")
	each := budget.USD(int64(probe.Cost) / 4)
	if each <= 0 {
		t.Fatalf("probe run charged %s for 4 failed attempts; want each charged", probe.Cost)
	}
	// Room for two attempts and half of a third.
	limit := budget.USD(int64(each) * 5 / 2)
	resp, b = g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "bounded", "X-Belay-Max-Cost-Usd", limit.Decimal())
	if resp.StatusCode != http.StatusPaymentRequired || resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d (x-should-retry %q); want 402 budget_exceeded: %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), b)
	}
	if got := resp.Header.Get("X-Belay-Attempts"); got != "2" {
		t.Errorf("attempts %q; want 2 (a third does not fit %s after two of about %s)", got, limit, each)
	}
	for _, want := range []string{"budget_exceeded", "not retried after attempt 2 failed", "the run's cost limit"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("answer lacks %q: %s", want, b)
		}
	}
	rec := g.run("bounded")
	if rec.Cost > limit || rec.Cost < each*2-each/10 {
		t.Errorf("run cost %s with a limit of %s; want two attempts' (about %s) and within the limit", rec.Cost, limit, each*2)
	}
	if rec.StopReason != "budget_exceeded" {
		t.Errorf("run %+v; want stopped for budget_exceeded", rec)
	}
}

// A write into Anthropic's 1-hour prompt cache costs 2× base input, a
// 5-minute one 1.25×: the usage's cache_creation split prices each part at
// its own rate, answered and streamed (1-hour writes were priced as
// 5-minute ones).
func TestAnthropicOneHourCacheWritesPriced(t *testing.T) {
	const usage = `"input_tokens":100,"cache_creation_input_tokens":1000,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":400,"ephemeral_1h_input_tokens":600}`
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"stream":true`) {
			fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{`+usage+`,"output_tokens":10}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{"+usage+",\"output_tokens\":1}}}\n\n")
		writeClaudeHi(w)
	})
	g := newGW(t, aliasRetrying(3, "", claudeDep(up.URL)), nil)
	// Sonnet 5.5 per million tokens: $2 input, $2.50 5-minute write, $4
	// 1-hour write (2× input), $10 output.
	want, _ := budget.ParseUSD("0.0037") // (100·2 + 400·2.50 + 600·4 + 10·10) / 1e6
	for _, stream := range []bool{false, true} {
		id := fmt.Sprintf("cache-1h-%v", stream)
		resp, body := g.do("POST", "/v1/messages", fmt.Sprintf(`{"model":"m","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream),
			"X-Belay-Run-Id", id)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %v: status %d: %s", stream, resp.StatusCode, body)
		}
		if rec := g.run(id); rec.Cost != want {
			t.Errorf("stream %v: run cost %s; want %s (the 600 1-hour cache writes at $4/M)", stream, rec.Cost, want)
		}
		var chat *trace.Span
		for _, sp := range storedSpans(t, g.stack, id) {
			if sp.Kind == trace.KindModel {
				chat = &sp
			}
		}
		if chat == nil || fmt.Sprint(chat.Attrs[trace.AttrCacheWriteTokens]) != "1000" || fmt.Sprint(chat.Attrs[trace.AttrCacheWrite1hTokens]) != "600" {
			t.Errorf("stream %v: model span %+v; want 1000 cache writes, 600 of them for an hour", stream, chat)
		}
	}
}

// A request that marks its prompt for Anthropic's 1-hour cache may be
// billed 2× input for all of it: the reservation prices the prompt at that
// rate, so a run's cost limit holds (a newcomer measured a $0.03 run
// charged $0.04 for one call whose 10,000-token system prompt was written
// into the 1-hour cache).
func TestCacheWritesReservedAtTheirPrice(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		written, long := len(b)/4, 0 // the whole prompt goes into the cache
		if strings.Contains(string(b), `"ttl":"1h"`) {
			long = written
		}
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_creation_input_tokens":%d,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d},"output_tokens":20}}`, written, written-long, long)
	})
	g := newGW(t, aliasRetrying(3, "", claudeDep(up.URL)), nil)
	system := strings.Repeat("policy text ", 3400) // about 10,000 tokens: $0.02 at input, $0.04 written for an hour
	body := func(ttl string) string {
		return `{"model":"m","max_tokens":20,"system":[{"type":"text","text":"` + system + `","cache_control":{"type":"ephemeral"` + ttl + `}}],"messages":[{"role":"user","content":"hi"}]}`
	}
	resp, b := g.do("POST", "/v1/messages", body(`,"ttl":"1h"`), "X-Belay-Run-Id", "tight", "X-Belay-Max-Cost-Usd", "0.03")
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("1-hour cache write of a $0.04 prompt under a $0.03 limit: status %d (cost %s); want 402 at admission: %s",
			resp.StatusCode, resp.Header.Get("X-Belay-Cost-Usd"), b)
	}
	limit, _ := budget.ParseUSD("0.05")
	resp, b = g.do("POST", "/v1/messages", body(`,"ttl":"1h"`), "X-Belay-Run-Id", "room", "X-Belay-Max-Cost-Usd", limit.Decimal())
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if rec := g.run("room"); rec.Cost > limit || rec.Cost < budget.Micros(40_000) {
		t.Errorf("run cost %s; want about $0.04 (the prompt at the 1-hour write price), within %s", rec.Cost, limit)
	}
	// A 5-minute write (1.25× input, $0.025) fits $0.03.
	resp, b = g.do("POST", "/v1/messages", body(``), "X-Belay-Run-Id", "five", "X-Belay-Max-Cost-Usd", "0.03")
	if resp.StatusCode != 200 {
		t.Fatalf("5-minute cache write under $0.03: status %d: %s", resp.StatusCode, b)
	}
	if rec := g.run("five"); rec.Cost > budget.Micros(30_000) || rec.Cost < budget.Micros(25_000) {
		t.Errorf("run cost %s; want about $0.025 (the prompt at the 5-minute write price), within $0.03", rec.Cost)
	}
}

// The money held for a retry prices its prompt at least at what the
// provider reported for the failed attempt: belay's estimate from a
// prompt's length is below a provider's count of Chinese text, and a
// retry held at the estimate took a run past its limit (an adversarial
// review: $0.0321 for a $0.0292 limit).
func TestRetryHeldAtTheReportedPrompt(t *testing.T) {
	const chars = 8000
	content := strings.Repeat("你好世界", chars/4)
	body := `{"model":"m","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"` + content + `"}]}`
	req, err := anthropic.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	est := anthropic.EstimatePromptTokens(req)
	const reported = chars // a token a character
	if est >= reported {
		t.Fatalf("the estimate (%d tokens) is not below the reported prompt (%d): the test needs it below", est, reported)
	}
	var n atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":%d,\"output_tokens\":1}}}\n\n", reported)
		if n.Add(1) == 1 {
			fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
			return
		}
		writeClaudeHi(w)
	})
	g := newGW(t, aliasRetrying(4, "", claudeDep(up.URL)), nil)
	p := budget.DefaultPricing()
	estimate, _ := p.Estimate("anthropic", "claude-sonnet-5-5", est, 10)
	one, _ := p.Cost("anthropic", "claude-sonnet-5-5", budget.Usage{InputTokens: reported, OutputTokens: 10})
	// Room for the failed attempt and the estimate of another, not for a
	// second attempt at the reported size.
	limit := one + estimate + (one-estimate)/4
	resp, b := g.do("POST", "/v1/messages", body, "X-Belay-Run-Id", "cjk", "X-Belay-Max-Cost-Usd", limit.Decimal())
	rec := g.run("cjk")
	if rec.Cost > limit {
		t.Errorf("run cost %s past its limit %s (status %d, attempts %s)", rec.Cost, limit, resp.StatusCode, resp.Header.Get("X-Belay-Attempts"))
	}
	if resp.StatusCode != http.StatusPaymentRequired || resp.Header.Get("X-Belay-Attempts") != "1" {
		t.Errorf("status %d after %s attempts; want 402 after 1 (a retry at the reported size does not fit): %.300s",
			resp.StatusCode, resp.Header.Get("X-Belay-Attempts"), b)
	}
}

// writeClaudeHi writes the rest of an Anthropic stream after its
// message_start: one text block "hi", then message_delta (10 output
// tokens) and message_stop.
func writeClaudeHi(w io.Writer) {
	for _, ev := range [][2]string{
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10}}`},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
	}
}

// claudeDep is deployment "a": claude-sonnet-5-5 at base.
func claudeDep(base string) string {
	return fmt.Sprintf("{name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: %q, api_key: k}", base)
}

// A retry whose money the store cannot hold is not made, and the client
// is told so as an admission the store failed is answered: 503
// store_unavailable with Retry-After and without x-should-retry: false,
// naming the attempt's failure (it answered the upstream's failure with
// x-should-retry: false, as if belay had spent its retries).
func TestRetryNotHeldWhenTheStoreFails(t *testing.T) {
	st := &flakyStore{Store: memstore.New()}
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		st.fail.Store(true) // the store fails while the attempt is upstream
		// 200 without choices: a transient failure, charged its prompt.
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","usage":{"prompt_tokens":1000,"completion_tokens":0}}`)
	})
	g := newGW(t, aliasRetrying(4, "", openAIDep("d", "gpt-4o", up.URL)), st)
	resp, b := g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", "r1") // a named run's money is in the store
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b, `"code":"store_unavailable"`) {
		t.Fatalf("status %d: %s; want 503 store_unavailable", resp.StatusCode, b)
	}
	if resp.Header.Get("X-Should-Retry") == "false" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("x-should-retry %q, retry-after %q; want the client's SDK to retry later",
			resp.Header.Get("X-Should-Retry"), resp.Header.Get("Retry-After"))
	}
	if n := calls.Load(); n != 1 || resp.Header.Get("X-Belay-Attempts") != "1" {
		t.Errorf("%d upstream calls, attempts %q; want 1 (no retry without its money held)", n, resp.Header.Get("X-Belay-Attempts"))
	}
	if !strings.Contains(b, "not retried after attempt 1 failed") {
		t.Errorf("the answer does not name the attempt's failure: %s", b)
	}
}

// The run's token limit holds for a call's retries as its money limit
// does: the tokens the failed attempts used and the next attempt's
// estimate are held before it is made (an adversarial review: one call's
// four attempts took a run with a 2,500-token limit to 4,187 tokens).
func TestRetriesHeldWithinTheRunsTokenLimit(t *testing.T) {
	var calls atomic.Int32
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		calls.Add(1)
		// 200 without choices: transient, charged its prompt.
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","usage":{"prompt_tokens":1000,"completion_tokens":0}}`)
	})
	y := strings.Replace(aliasRetrying(4, "", openAIDep("d", "gpt-4o", up.URL)), "max_cost_usd: 5}", "max_cost_usd: 5, max_tokens: 2500}", 1)
	if !strings.Contains(y, "max_tokens: 2500") {
		t.Fatalf("config without the token limit:\n%s", y)
	}
	g := newGW(t, y, nil)
	// About 1,000 prompt tokens and 100 output: two attempts fit, a third does not.
	body := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 800) + `"}]}`
	resp, b := g.do("POST", "/v1/chat/completions", body, "X-Belay-Run-Id", "tok")
	if resp.StatusCode != http.StatusPaymentRequired || calls.Load() != 2 || !strings.Contains(b, "not retried after attempt 2 failed") ||
		!strings.Contains(b, "token limit") {
		t.Fatalf("status %d after %d upstream calls: %s; want 402 after 2, naming the token limit", resp.StatusCode, calls.Load(), b)
	}
	// Each failed attempt is charged the prompt the provider stated and
	// its answer's length as estimated output.
	if rec := g.run("tok"); rec.InputTokens+rec.OutputTokens > 2500 || rec.InputTokens < 2000 {
		t.Errorf("run %+v; want the two attempts' 2,000-odd tokens, within 2,500", rec)
	}
}

// hangingReserve is a store whose first Reserve after hang is set blocks
// until its context ends (a store that hangs rather than fails).
type hangingReserve struct {
	store.Store
	hang     atomic.Bool
	entered  chan struct{}
	returned chan error
}

func (s *hangingReserve) Reserve(ctx context.Context, r budget.Reservation) error {
	if !s.hang.CompareAndSwap(true, false) { // the first Reserve after hang is set hangs
		return s.Store.Reserve(ctx, r)
	}
	close(s.entered)
	<-ctx.Done()
	s.returned <- context.Cause(ctx)
	return context.Cause(ctx)
}

// The money for a retry is held with the call's context: a store that
// hangs does not hold a call whose client has gone (it held it with a
// context that never ended).
func TestCoverEndsWithTheClient(t *testing.T) {
	st := &hangingReserve{Store: memstore.New(), entered: make(chan struct{}), returned: make(chan error, 1)}
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		st.hang.Store(true)
		fmt.Fprint(w, `{"id":"x","object":"chat.completion","usage":{"prompt_tokens":1000,"completion_tokens":0}}`)
	})
	g := newGW(t, aliasRetrying(4, "", openAIDep("d", "gpt-4o", up.URL)), st)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-st.entered // the retry's money is being held
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", g.srv.URL+"/v1/chat/completions", strings.NewReader(chat))
	req.Header.Set("X-Belay-Run-Id", "gone")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("status %d; want the client's request canceled", resp.StatusCode)
	}
	select {
	case err := <-st.returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the held Reserve ended with %v; want the client's cancel", err)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a wait for success
		t.Fatal("the store's Reserve still holds the call 10 s after its client left")
	}
}
