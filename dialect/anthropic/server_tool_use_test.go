package anthropic

import (
	"testing"

	"github.com/belay-run/belay/internal/fastjson"
)

// usage.server_tool_use.web_search_requests counts the searches, in a
// message and in a stream's message_delta (cumulative, as its other
// counts); a message without it counts none.
func TestServerToolUseWebSearches(t *testing.T) {
	var m Response
	body := `{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5",` +
		`"usage":{"input_tokens":12,"output_tokens":30,"server_tool_use":{"web_search_requests":3,"web_fetch_requests":1}}}`
	if err := fastjson.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	if got := m.Usage.Dialect().WebSearches; got != 3 {
		t.Errorf("message: %d web searches, want 3", got)
	}
	if got := (Usage{InputTokens: 1}).Dialect().WebSearches; got != 0 {
		t.Errorf("no server_tool_use: %d web searches, want 0", got)
	}
	if rt := FromDialect(m.Usage.Dialect()); rt.ServerToolUse == nil || rt.ServerToolUse.WebSearchRequests != 3 {
		t.Errorf("FromDialect: server_tool_use %+v, want 3 web searches", rt.ServerToolUse)
	}

	var a Accumulator
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":10,"server_tool_use":{"web_search_requests":1}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":40,"server_tool_use":{"web_search_requests":2}}}`,
		`{"type":"message_stop"}`,
	} {
		if err := a.Add([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	u, ok := a.Usage()
	if !ok || u.WebSearches != 2 || u.Output != 40 {
		t.Errorf("stream: %+v (reported %v), want 2 web searches and 40 output tokens", u, ok)
	}
}

// A stream cut after its searches began and before its usage said them
// counts the server_tool_use blocks named web_search.
func TestCutStreamCountsSearchesBegun(t *testing.T) {
	var a Accumulator
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"msg_3","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":12,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]}}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"srvtoolu_2","name":"web_search","input":{}}}`,
	} {
		if err := a.Add([]byte(ev)); err != nil {
			t.Fatal(err)
		}
	}
	if e := a.Estimate(12); e.WebSearches != 2 {
		t.Errorf("cut stream's estimate: %+v, want 2 web searches", e)
	}
}
