package gateway

import "encoding/json"

// payload returns the call's messages for the trace: the request's
// messages (with the Anthropic system prompt when there is one), and the
// answer's message (OpenAI choices, Anthropic content) for a non-streamed
// call that succeeded. A streamed answer is not kept (belay relays it
// without buffering), so only its input is recorded.
func (c *call) payload() (input, output string) {
	var in map[string]json.RawMessage
	if json.Unmarshal(c.req.body, &in) == nil {
		if sys, ok := in["system"]; ok {
			b, _ := json.Marshal(map[string]json.RawMessage{"system": sys, "messages": in["messages"]})
			input = string(b)
		} else if m, ok := in["messages"]; ok {
			input = string(m)
		}
	}
	if a := c.answer; a != nil && a.status/100 == 2 {
		var out map[string]json.RawMessage
		if json.Unmarshal(a.body, &out) == nil {
			if ch, ok := out["choices"]; ok {
				output = string(ch)
			} else if ct, ok := out["content"]; ok {
				output = string(ct)
			}
		}
	}
	return input, output
}
