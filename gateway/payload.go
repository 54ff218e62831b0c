package gateway

import (
	"encoding/json"

	"github.com/belay-run/belay/dialect"
)

// payload returns the call's messages for the trace: the request's
// messages (with the Anthropic system prompt when there is one), and the
// answer's message (OpenAI choices, Anthropic content) for a non-streamed
// call that succeeded, or what a stream relayed to the client (whole or
// cut), as its follower kept it (up to dialect.KeepMax bytes).
//
// Only the top level of each body is scanned (dialect.EachMember); a body
// that is not a JSON object records nothing, and of a repeated member the
// last is kept, as json.Unmarshal into a map would.
func (c *call) payload() (input, output string) {
	var sys, msgs []byte
	_ = dialect.EachMember(c.req.body, func(name, value []byte) {
		switch string(name) {
		case "system":
			sys = value
		case "messages":
			msgs = value
		}
	})
	if sys != nil {
		b, _ := json.Marshal(map[string]json.RawMessage{"system": sys, "messages": msgs})
		input = string(b)
	} else if msgs != nil {
		input = string(msgs)
	}
	if c.streamed != nil {
		return input, string(c.streamed.answer())
	}
	if a := c.answer; a != nil && a.status/100 == 2 {
		var choices, content []byte
		_ = dialect.EachMember(a.body, func(name, value []byte) {
			switch string(name) {
			case "choices":
				choices = value
			case "content":
				content = value
			}
		})
		if choices != nil {
			output = string(choices)
		} else if content != nil {
			output = string(content)
		}
	}
	return input, output
}
