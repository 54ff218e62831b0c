package gateway

import (
	"encoding/json"

	"github.com/belay-run/belay/dialect"
)

// payload returns the call's messages for the trace: the request's
// messages (with the Anthropic system prompt when there is one; a
// Responses request's input, with its instructions when there are some),
// and the answer's message (OpenAI choices, Anthropic content, a
// response's output) for a non-streamed call that succeeded, or what a
// stream relayed to the client (whole or cut), as its follower kept it
// (up to dialect.KeepMax bytes).
//
// Only the top level of each body is scanned (dialect.EachMember); a body
// that is not a JSON object records nothing, and of a repeated member the
// last is kept, as json.Unmarshal into a map would.
func (c *call) payload() (input, output string) {
	var sys, msgs, instructions, in []byte
	_ = dialect.EachMember(c.req.body, func(name, value []byte) {
		switch string(name) {
		case "system":
			sys = value
		case "messages":
			msgs = value
		case "instructions":
			instructions = value
		case "input":
			in = value
		}
	})
	switch {
	case sys != nil:
		b, _ := json.Marshal(map[string]json.RawMessage{"system": sys, "messages": msgs})
		input = string(b)
	case msgs != nil:
		input = string(msgs)
	case instructions != nil && string(instructions) != "null":
		b, _ := json.Marshal(map[string]json.RawMessage{"instructions": instructions, "input": in})
		input = string(b)
	case in != nil:
		input = string(in)
	}
	if c.streamed != nil {
		return input, string(c.streamed.answer())
	}
	if a := c.answer; a != nil && a.status/100 == 2 {
		var choices, content, out []byte
		_ = dialect.EachMember(a.body, func(name, value []byte) {
			switch string(name) {
			case "choices":
				choices = value
			case "content":
				content = value
			case "output":
				out = value
			}
		})
		switch {
		case choices != nil:
			output = string(choices)
		case content != nil:
			output = string(content)
		case out != nil:
			output = string(out)
		}
	}
	return input, output
}
