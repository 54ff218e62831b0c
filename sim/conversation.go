package sim

import (
	"regexp"
	"strings"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/openai"
)

// Conversation is a request seen without its dialect: what script rules
// match against.
type Conversation struct {
	Model  string
	System string
	Turns  []Turn
	// Tools are the names of the tools the request declares.
	Tools []string
}

// Turn is one message. Role is "user", "assistant" or "tool" (a tool
// result; Anthropic tool_result blocks become one "tool" turn each).
type Turn struct {
	Role      string
	Text      string
	ToolCalls []SeenCall
	// ToolName is the tool a "tool" turn answers, found through the call id.
	ToolName string
}

// SeenCall is a tool call made by the assistant earlier in the conversation.
type SeenCall struct {
	ID, Name, Arguments string
}

var scenarioRE = regexp.MustCompile(`(?i)scenario:\s*([\w.\-]+)`)

// Scenario returns the NAME of a "scenario: NAME" marker in the system
// prompt, or "".
func (c *Conversation) Scenario() string {
	if m := scenarioRE.FindStringSubmatch(c.System); m != nil {
		return m[1]
	}
	return ""
}

// LastUserText returns the text of the latest user turn that has text.
func (c *Conversation) LastUserText() string {
	for i := len(c.Turns) - 1; i >= 0; i-- {
		if t := c.Turns[i]; t.Role == "user" && t.Text != "" {
			return t.Text
		}
	}
	return ""
}

// AssistantTurns counts assistant turns.
func (c *Conversation) AssistantTurns() int {
	n := 0
	for _, t := range c.Turns {
		if t.Role == "assistant" {
			n++
		}
	}
	return n
}

// ToolResults counts results of tool name (any tool when name is "").
func (c *Conversation) ToolResults(name string) int {
	n := 0
	for _, t := range c.Turns {
		if t.Role == "tool" && (name == "" || t.ToolName == name) {
			n++
		}
	}
	return n
}

// LastToolResult returns the latest turn when it is a tool result.
func (c *Conversation) LastToolResult() (Turn, bool) {
	if n := len(c.Turns); n > 0 && c.Turns[n-1].Role == "tool" {
		return c.Turns[n-1], true
	}
	return Turn{}, false
}

// AllText returns every turn's text, tool arguments included, one per line.
func (c *Conversation) AllText() string {
	var b strings.Builder
	for _, t := range c.Turns {
		b.WriteString(t.Text)
		b.WriteByte('\n')
		for _, call := range t.ToolCalls {
			b.WriteString(call.Arguments)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// PromptChars is the character count script replies and usage are based on.
func (c *Conversation) promptChars() int {
	return len(c.System) + len(c.AllText())
}

func fromOpenAI(r *openai.Request) *Conversation {
	c := &Conversation{Model: r.Model}
	names := map[string]string{}
	var sys []string
	for _, m := range r.Messages {
		switch m.Role {
		case "system", "developer":
			sys = append(sys, m.Text())
		case "tool", "function":
			c.Turns = append(c.Turns, Turn{Role: "tool", Text: m.Text(), ToolName: names[m.ToolCallID]})
		default:
			t := Turn{Role: m.Role, Text: m.Text()}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
				t.ToolCalls = append(t.ToolCalls, SeenCall{tc.ID, tc.Function.Name, tc.Function.Arguments})
			}
			c.Turns = append(c.Turns, t)
		}
	}
	c.System = strings.Join(sys, "\n")
	for _, t := range r.Tools {
		c.Tools = append(c.Tools, t.Function.Name)
	}
	return c
}

func fromAnthropic(r *anthropic.Request) *Conversation {
	c := &Conversation{Model: r.Model, System: r.SystemText()}
	names := map[string]string{}
	for _, m := range r.Messages {
		t := Turn{Role: m.Role}
		var texts []string
		for _, b := range m.Blocks() {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				names[b.ID] = b.Name
				t.ToolCalls = append(t.ToolCalls, SeenCall{b.ID, b.Name, string(b.Input)})
			case "tool_result":
				c.Turns = append(c.Turns, Turn{Role: "tool", Text: b.ResultText(), ToolName: names[b.ToolUseID]})
			}
		}
		t.Text = strings.Join(texts, "\n")
		if t.Text != "" || len(t.ToolCalls) > 0 {
			c.Turns = append(c.Turns, t)
		}
	}
	for _, t := range r.Tools {
		c.Tools = append(c.Tools, t.Name)
	}
	return c
}
