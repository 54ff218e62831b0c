package sim_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/sim"
)

// A streamed tool call names its function in its first delta only, as
// OpenAI's streams do (../shared/cases/wire/openai-stream-ok-with-usage.json):
// later deltas carry the index and a piece of the arguments.
func TestStreamedToolCallNamesItsFunctionOnce(t *testing.T) {
	_, ts := startSim(t, sim.Config{Seed: 1, Script: mustScript(t, refundScript)})
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"I want a refund for order B-42."}]}`
	res, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var deltas []map[string]json.RawMessage
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function map[string]json.RawMessage `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				deltas = append(deltas, tc.Function)
			}
		}
	}
	if len(deltas) < 2 {
		t.Fatalf("%d tool call deltas, want the head and at least one piece of arguments", len(deltas))
	}
	if string(deltas[0]["name"]) != `"lookup_order"` || string(deltas[0]["arguments"]) != `""` {
		t.Fatalf("first delta's function = %v, want name lookup_order and arguments \"\"", deltas[0])
	}
	for i, d := range deltas[1:] {
		if _, ok := d["name"]; ok {
			t.Fatalf("delta %d repeats the name: %v", i+1, d)
		}
		if _, ok := d["arguments"]; !ok {
			t.Fatalf("delta %d has no arguments: %v", i+1, d)
		}
	}
}
