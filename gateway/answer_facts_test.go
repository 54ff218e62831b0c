package gateway_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/belay-run/belay/trace"
)

// A model call's span carries what its answer said of itself: its id
// (gen_ai.response.id), its model and its finish reasons, for each API,
// streamed or not (an Agents SDK test: a response cut at its output limit
// read "ok" in the trace, with nothing to say it was incomplete).
func TestModelSpanCarriesTheAnswersFacts(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	long := strings.Repeat("tell me more about belay devices ", 10)
	for _, tc := range []struct {
		name, path, body string
		idPrefix         string
		finish           []string
	}{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, "chatcmpl-", []string{"stop"}},
		{"chat stream, tools", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Weather in Paris?"}],` +
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`, "chatcmpl-", []string{"tool_calls"}},
		{"chat, two choices", "/v1/chat/completions", `{"model":"gpt-4o-mini","n":2,"max_tokens":5,"messages":[{"role":"user","content":"` + long + `"}]}`, "chatcmpl-", []string{"length", "length"}},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-5-5","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, "msg_", []string{"end_turn"}},
		{"messages stream", "/v1/messages", `{"model":"claude-sonnet-5-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "msg_", []string{"end_turn"}},
		{"responses, cut", "/v1/responses", `{"model":"gpt-4o-mini","max_output_tokens":16,"input":"` + long + `"}`, "resp_", []string{"max_output_tokens"}},
		{"responses stream", "/v1/responses", `{"model":"gpt-4o-mini","stream":true,"input":"hi"}`, "resp_", []string{"completed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "facts-" + strings.ReplaceAll(tc.name, " ", "-")
			id = strings.NewReplacer(",", "").Replace(id)
			resp, body := h.post(tc.path, tc.body, map[string]string{"X-Belay-Run-Id": id, "anthropic-version": "2023-06-01"})
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			h.quiesce()
			var model *trace.Span
			for _, sp := range storedSpans(t, h.stack, id) {
				if sp.Kind == trace.KindModel {
					model = &sp
				}
			}
			if model == nil {
				t.Fatal("no model span")
			}
			rid, _ := model.Attrs[trace.AttrResponseID].(string)
			rmodel, _ := model.Attrs[trace.AttrResponseModel].(string)
			finish := fmt.Sprint(model.Attrs[trace.AttrFinishReasons])
			if !strings.HasPrefix(rid, tc.idPrefix) || !strings.Contains(body, rid) || rmodel == "" {
				t.Errorf("response id %q, model %q (body %.200s)", rid, rmodel, body)
			}
			if got := model.Attrs[trace.AttrFinishReasons]; !slices.Equal(asStrings(got), tc.finish) {
				t.Errorf("finish reasons %s, want %v", finish, tc.finish)
			}
		})
	}
}

// asStrings returns a []string attribute value, as stored ([]string or
// []any after a JSON round trip).
func asStrings(v any) []string {
	switch s := v.(type) {
	case []string:
		return s
	case []any:
		out := make([]string, len(s))
		for i, x := range s {
			out[i], _ = x.(string)
		}
		return out
	}
	return nil
}
