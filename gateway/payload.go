package gateway

import (
	"encoding/json"

	"github.com/belay-run/belay/dialect"
)

// answerFacts returns what the call's answer said of itself, for the
// trace: its id, its model and its finish reasons (each chat choice's
// finish_reason, Anthropic's stop_reason, a response's status; see the
// fronts' and followers' facts); empty for a call without a 2xx answer.
// Read in the settle, after the answer went out: a non-streamed body is
// decoded for it there, a stream's follower kept them as it went.
func (c *call) answerFacts() (id, model string, finish []string) {
	if c.streamed != nil {
		if f, ok := c.streamed.(interface {
			facts() (string, string, []string)
		}); ok {
			return f.facts()
		}
		return "", "", nil
	}
	if a := c.answer; a != nil && a.status/100 == 2 {
		if f, ok := c.f.(interface {
			answerFacts([]byte) (string, string, []string)
		}); ok {
			return f.answerFacts(a.body)
		}
	}
	return "", "", nil
}

// payload returns the call's messages for the trace: the request's
// messages (with the Anthropic system prompt when there is one; a
// Responses request's input, with its instructions when there are some),
// and the answer's message (its front's answerMember: OpenAI choices,
// Anthropic content, a response's output) for a non-streamed call that
// succeeded, or what a
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
		member := c.f.answerMember() // choices, content, output
		_ = dialect.EachMember(a.body, func(name, value []byte) {
			if string(name) == member {
				output = string(value)
			}
		})
	}
	return input, output
}
