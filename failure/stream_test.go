package failure

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

func TestClassifyStream(t *testing.T) {
	tests := []struct {
		name    string
		d       Dialect
		body    string
		reason  Reason // "" means OK
		kind    Kind
		started bool
		usage   StreamUsage
	}{
		{"openai role-only then cut", DialectOpenAI, sse(
			`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`),
			StreamInterrupted, Transient, false, StreamUsage{}},
		{"openai content then cut", DialectOpenAI, sse(
			`data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}`,
			`data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}`),
			StreamInterrupted, Transient, true, StreamUsage{}},
		{"openai error before content", DialectOpenAI, sse(
			`data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}`,
			`data: {"error":{"message":"Rate limit","type":"tokens","code":"rate_limit_exceeded"}}`),
			RateLimited, Transient, false, StreamUsage{}},
		{"openai usage with details", DialectOpenAI, sse(
			`data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}`,
			`data: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":12}}}`,
			`data: [DONE]`),
			"", OK, true, StreamUsage{InputTokens: 100, OutputTokens: 30, CachedInputTokens: 64, ReasoningTokens: 12}},
		{"router error with embedded 502 mid-stream", DialectOpenAI, sse(
			`data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`,
			`data: {"error":{"message":"Upstream error","code":502}}`, `data: [DONE]`),
			ServerError, Transient, true, StreamUsage{}},
		{"anthropic cut without message_stop", DialectAnthropic, sse(
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}",
			"event: ping\ndata: {\"type\":\"ping\"}",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"),
			StreamInterrupted, Transient, false, StreamUsage{InputTokens: 12, OutputTokens: 1}},
		{"anthropic error before output", DialectAnthropic, sse(
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5}}}",
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}"),
			ServerError, Transient, false, StreamUsage{InputTokens: 5}},
		{"anthropic cache usage", DialectAnthropic, sse(
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"cache_read_input_tokens\":2000,\"cache_creation_input_tokens\":50,\"output_tokens\":1}}}",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":77}}",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}"),
			"", OK, true, StreamUsage{InputTokens: 3, OutputTokens: 77, CachedInputTokens: 2000, CacheWriteTokens: 50}},
		{"anthropic error event with non-JSON data", DialectAnthropic, sse("event: error\ndata: oops"),
			Unknown, Permanent, false, StreamUsage{}},
		{"gemini no finishReason", DialectGemini, sse(
			`data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"}}]}`),
			StreamInterrupted, Transient, true, StreamUsage{}},
		{"gemini function call then finish", DialectGemini, sse(
			`data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":4,"candidatesTokenCount":6,"thoughtsTokenCount":9,"cachedContentTokenCount":1}}`),
			"", OK, true, StreamUsage{InputTokens: 4, OutputTokens: 6, ReasoningTokens: 9, CachedInputTokens: 1}},
		{"gemini error in stream", DialectGemini, sse(
			`data: {"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}`),
			Overloaded, Transient, false, StreamUsage{}},
		{"gemini json array stream complete", DialectGemini,
			`[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":2}}]`,
			"", OK, true, StreamUsage{InputTokens: 2, OutputTokens: 2}},
		{"gemini json array stream cut", DialectGemini, `[{"candidates":[{"content":{"parts":[{"text":"a"}]}}]},{"candi`,
			StreamInterrupted, Transient, true, StreamUsage{}},
		{"gemini blocked prompt", DialectGemini, sse(`data: {"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"}}`),
			ContentFiltered, Permanent, false, StreamUsage{}},
		{"responses api completed", DialectOpenAI, sse(
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}",
			"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":10,\"output_tokens\":3,\"input_tokens_details\":{\"cached_tokens\":4},\"output_tokens_details\":{\"reasoning_tokens\":1}}}}"),
			"", OK, true, StreamUsage{InputTokens: 10, OutputTokens: 3, CachedInputTokens: 4, ReasoningTokens: 1}},
		{"responses api failed", DialectOpenAI, sse(
			"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}"),
			ServerError, Transient, false, StreamUsage{}},
		{"responses api function call begun, then cut", DialectOpenAI, sse(
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"\"}}"),
			StreamInterrupted, Transient, true, StreamUsage{}},
		{"responses api web search begun, then cut", DialectOpenAI, sse(
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"web_search_call\",\"status\":\"in_progress\"}}"),
			StreamInterrupted, Transient, true, StreamUsage{}},
		{"responses api message and reasoning begun are no output", DialectOpenAI, sse(
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"reasoning\",\"summary\":[]}}",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"item\":{\"type\":\"message\",\"content\":[]}}"),
			StreamInterrupted, Transient, false, StreamUsage{}},
		{"responses api error event", DialectOpenAI, sse(
			"event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow\"}"),
			RateLimited, Transient, false, StreamUsage{}},
		{"empty body", DialectOpenAI, "", StreamInterrupted, Transient, false, StreamUsage{}},
		{"json error instead of stream", DialectAnthropic, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			Overloaded, Transient, false, StreamUsage{}},
		{"json completion instead of stream", DialectOpenAI, `{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
			"", OK, false, StreamUsage{InputTokens: 1, OutputTokens: 2}},
		{"html instead of stream", DialectOpenAI, "<html><title>502 Bad Gateway</title></html>", ServerError, Transient, false, StreamUsage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, u := ClassifyStream(tt.d, []byte(tt.body))
			if u != tt.usage {
				t.Errorf("usage = %+v, want %+v", u, tt.usage)
			}
			if tt.reason == "" {
				if e != nil {
					t.Fatalf("got %v, want nil", e)
				}
				return
			}
			if e == nil {
				t.Fatalf("nil, want %s", tt.reason)
			}
			if e.Reason != tt.reason || e.Kind != tt.kind || e.OutputStarted != tt.started {
				t.Errorf("got %s/%s started=%v, want %s/%s started=%v (%v)",
					e.Kind, e.Reason, e.OutputStarted, tt.kind, tt.reason, tt.started, e)
			}
		})
	}
}

func TestStreamWatcherObservations(t *testing.T) {
	w := NewStreamWatcher(DialectAnthropic)
	steps := []struct {
		event, data string
		want        Observation
	}{
		{"message_start", `{"type":"message_start","message":{"usage":{"input_tokens":7,"output_tokens":1}}}`, Observation{Usage: true}},
		{"ping", `{"type":"ping"}`, Observation{}},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"lookup","input":{}}}`,
			Observation{Output: true, FirstOutput: true}},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
			Observation{Output: true}},
		{"message_delta", `{"type":"message_delta","usage":{"output_tokens":9}}`, Observation{Usage: true}},
		{"message_stop", `{"type":"message_stop"}`, Observation{Terminator: true}},
	}
	for i, s := range steps {
		if got := w.Observe(s.event, []byte(s.data)); got != s.want {
			t.Errorf("step %d (%s): got %+v, want %+v", i, s.event, got, s.want)
		}
	}
	if !w.OutputStarted() || !w.Done() || w.Err() != nil {
		t.Errorf("state: started %v done %v err %v", w.OutputStarted(), w.Done(), w.Err())
	}
	if u, ok := w.Usage(); !ok || u != (StreamUsage{InputTokens: 7, OutputTokens: 9}) {
		t.Errorf("usage = %+v, %v", u, ok)
	}
	if e := w.End(nil); e != nil {
		t.Errorf("End after message_stop = %v", e)
	}
}

func TestStreamWatcherFirstFailureWins(t *testing.T) {
	w := NewStreamWatcher(DialectOpenAI)
	w.Observe("", []byte(`{"choices":[{"delta":{"content":"a"}}]}`))
	o := w.Observe("", []byte(`{"error":{"type":"server_error","message":"x"}}`))
	if o.Err == nil || !o.Err.OutputStarted || o.Err.Reason != ServerError {
		t.Fatalf("observation error = %+v", o.Err)
	}
	w.Observe("", []byte(`{"error":{"code":"rate_limit_exceeded"}}`))
	if got := w.End(io.EOF); got != o.Err {
		t.Errorf("End = %v, want the first failure %v", got, o.Err)
	}
}

func TestStreamWatcherEndReadErrors(t *testing.T) {
	w := NewStreamWatcher(DialectOpenAI)
	w.Observe("", []byte(`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`))
	reset := errors.New("connection reset")
	e := w.End(reset)
	if e.Reason != StreamInterrupted || !e.OutputStarted || !errors.Is(e, reset) {
		t.Errorf("End(reset) = %+v", e)
	}

	w = NewStreamWatcher(DialectOpenAI)
	e = w.End(context.Canceled)
	if e.Reason != Canceled || e.Kind != Fatal {
		t.Errorf("End(canceled) = %+v", e)
	}
}
