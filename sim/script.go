package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/belay-run/belay/internal/yamlnode"
)

// Script chooses the simulated model's replies. Rules are tried in order;
// the first whose When matches gives the reply. When no rule matches, the
// default reply is a short plausible text that quotes the user.
//
// A Script is compiled once (New does it) and is then read-only, safe for
// concurrent use.
//
// YAML form:
//
//	captures: ['order (?P<order_id>[A-Z]-\d+)']
//	rules:
//	  - name: look up the order
//	    when: {scenario: refund, contains: refund, no_tool_result: lookup_order}
//	    reply:
//	      tool_calls:
//	        - {name: lookup_order, arguments: {order_id: "{{order_id}}"}}
//	  - name: refund hangs once
//	    when: {tool_result: lookup_order, no_tool_result: issue_refund}
//	    fault: hang
//	    fault_times: 1
//	    reply:
//	      tool_calls: [{name: issue_refund, arguments: {order_id: "{{order_id}}"}}]
//	  - when: {tool_result: issue_refund}
//	    reply: {text: "Refunded order {{order_id}}."}
type Script struct {
	// Captures are regexes run over the whole conversation before any rule
	// (first match each); their groups can be used by every rule's reply,
	// so a value found in turn 1 (an order id) is still known in turn 5.
	Captures []string `yaml:"captures" json:"captures,omitempty"`
	Rules    []Rule   `yaml:"rules" json:"rules"`

	captures []*regexp.Regexp
	compiled bool
}

// Rule is one match and what to do.
type Rule struct {
	Name  string `yaml:"name" json:"name,omitempty"`
	When  Match  `yaml:"when" json:"when"`
	Reply Reply  `yaml:"reply" json:"reply"`
	// Fault, when set, is injected instead of the reply. FaultTimes bounds
	// how often, per run (X-Belay-Run-Id; all requests without one share a
	// count); 0 means every time the rule matches. Once the fault is spent
	// the rule gives its reply, or, with no reply, lets later rules match.
	Fault      Fault `yaml:"fault" json:"fault,omitempty"`
	FaultTimes int   `yaml:"fault_times" json:"fault_times,omitempty"`
	// Probability, when in (0, 1), makes the rule apply to only that share
	// of the requests it matches (a draw from the request's generator, so
	// deterministic for a seed): a stochastic model that now and then
	// answers differently. 0 means always. Requests it skips go on to the
	// later rules.
	Probability float64 `yaml:"probability" json:"probability,omitempty"`
}

// Match is a conjunction: every condition that is set must hold. The zero
// Match matches every request.
type Match struct {
	// Scenario: the system prompt carries the marker "scenario: NAME".
	Scenario string `yaml:"scenario" json:"scenario,omitempty"`
	// Contains: the latest user text contains this (case-insensitive).
	Contains string `yaml:"contains" json:"contains,omitempty"`
	// Regex must match the latest user text; named groups are captured.
	Regex string `yaml:"regex" json:"regex,omitempty"`
	// ConversationRegex must match somewhere in the whole conversation
	// (user, assistant and tool text, tool arguments); groups are captured.
	ConversationRegex string `yaml:"conversation_regex" json:"conversation_regex,omitempty"`
	// ToolResult: a result of this tool is in the conversation.
	ToolResult string `yaml:"tool_result" json:"tool_result,omitempty"`
	// NoToolResult: no result of this tool is in the conversation.
	NoToolResult string `yaml:"no_tool_result" json:"no_tool_result,omitempty"`
	// LastToolResult: the latest message is a result of this tool.
	LastToolResult string `yaml:"last_tool_result" json:"last_tool_result,omitempty"`
	// Tool: the request declares this tool.
	Tool string `yaml:"tool" json:"tool,omitempty"`
	// AssistantTurns: exactly this many assistant turns so far.
	AssistantTurns *int `yaml:"assistant_turns" json:"assistant_turns,omitempty"`
	// MinAssistantTurns / MaxAssistantTurns bound the assistant turns.
	MinAssistantTurns *int `yaml:"min_assistant_turns" json:"min_assistant_turns,omitempty"`
	MaxAssistantTurns *int `yaml:"max_assistant_turns" json:"max_assistant_turns,omitempty"`

	regex, convRegex *regexp.Regexp
}

// Reply is what the model says: text, tool calls, or both. Strings may use
// {{NAME}} placeholders: a group captured by Regex or ConversationRegex
// (named, or numbered "1", "2"...), or last_user, model, scenario,
// assistant_turns, last_tool_result. Unknown placeholders are left as is.
type Reply struct {
	Text      string     `yaml:"text" json:"text,omitempty"`
	ToolCalls []ToolCall `yaml:"tool_calls" json:"tool_calls,omitempty"`
}

// ToolCall is a call the model makes; Arguments is encoded as a JSON object
// after placeholders in its string values are filled in.
type ToolCall struct {
	Name      string         `yaml:"name" json:"name"`
	Arguments map[string]any `yaml:"arguments" json:"arguments,omitempty"`
}

// ParseScript reads a YAML script and compiles it. Unknown keys are
// errors, as are bad regexes and unknown faults; errors name the rule
// ("rules[2].when.regex").
func ParseScript(data []byte) (*Script, error) {
	return LoadScript(bytes.NewReader(data))
}

// LoadScript is ParseScript over a reader.
func LoadScript(r io.Reader) (*Script, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil && err != io.EOF {
		return nil, fmt.Errorf("sim: script: %s", yamlnode.PlainError(err))
	}
	if err := s.Compile(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Compile checks the script and compiles its regexes. It is idempotent.
func (s *Script) Compile() error {
	if s == nil || s.compiled {
		return nil
	}
	s.captures = s.captures[:0]
	for i, c := range s.Captures {
		re, err := regexp.Compile(c)
		if err != nil {
			return fmt.Errorf("sim: script captures[%d]: %w", i, err)
		}
		s.captures = append(s.captures, re)
	}
	for i := range s.Rules {
		r := &s.Rules[i]
		at := func(f string) string { return fmt.Sprintf("sim: script rules[%d]%s", i, f) }
		var err error
		if r.When.Regex != "" {
			if r.When.regex, err = regexp.Compile(r.When.Regex); err != nil {
				return fmt.Errorf("%s: %w", at(".when.regex"), err)
			}
		}
		if r.When.ConversationRegex != "" {
			if r.When.convRegex, err = regexp.Compile(r.When.ConversationRegex); err != nil {
				return fmt.Errorf("%s: %w", at(".when.conversation_regex"), err)
			}
		}
		if r.Fault, err = ParseFault(string(r.Fault)); err != nil {
			return fmt.Errorf("%s: %w", at(".fault"), err)
		}
		if !(r.Probability >= 0 && r.Probability <= 1) {
			return fmt.Errorf("%s: %v is not a probability in [0, 1]", at(".probability"), r.Probability)
		}
		if r.FaultTimes < 0 {
			return fmt.Errorf("%s: must be >= 0", at(".fault_times"))
		}
		if r.Reply.Text == "" && len(r.Reply.ToolCalls) == 0 && r.Fault == NoFault {
			return fmt.Errorf("%s: needs a reply (text or tool_calls) or a fault", at(""))
		}
		for j, tc := range r.Reply.ToolCalls {
			if tc.Name == "" {
				return fmt.Errorf("%s: is required", at(fmt.Sprintf(".reply.tool_calls[%d].name", j)))
			}
			if _, err := json.Marshal(tc.Arguments); err != nil {
				return fmt.Errorf("%s: %w", at(fmt.Sprintf(".reply.tool_calls[%d].arguments", j)), err)
			}
		}
	}
	s.compiled = true
	return nil
}

// match reports whether m holds for c and returns the captured values.
func (m *Match) match(c *Conversation) (map[string]string, bool) {
	turns := c.AssistantTurns()
	switch {
	case m.Scenario != "" && !strings.EqualFold(c.Scenario(), m.Scenario),
		m.Contains != "" && !strings.Contains(strings.ToLower(c.LastUserText()), strings.ToLower(m.Contains)),
		m.ToolResult != "" && c.ToolResults(m.ToolResult) == 0,
		m.NoToolResult != "" && c.ToolResults(m.NoToolResult) > 0,
		m.Tool != "" && !containsString(c.Tools, m.Tool),
		m.AssistantTurns != nil && turns != *m.AssistantTurns,
		m.MinAssistantTurns != nil && turns < *m.MinAssistantTurns,
		m.MaxAssistantTurns != nil && turns > *m.MaxAssistantTurns:
		return nil, false
	}
	if m.LastToolResult != "" {
		if t, ok := c.LastToolResult(); !ok || t.ToolName != m.LastToolResult {
			return nil, false
		}
	}
	vars := map[string]string{}
	if m.regex != nil && !capture(m.regex, c.LastUserText(), vars) {
		return nil, false
	}
	if m.convRegex != nil && !capture(m.convRegex, c.AllText(), vars) {
		return nil, false
	}
	return vars, true
}

func capture(re *regexp.Regexp, s string, vars map[string]string) bool {
	sub := re.FindStringSubmatch(s)
	if sub == nil {
		return false
	}
	for i, name := range re.SubexpNames() {
		if i == 0 {
			continue
		}
		vars[strconv.Itoa(i)] = sub[i]
		if name != "" {
			vars[name] = sub[i]
		}
	}
	return true
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([\w.\-]+)\s*\}\}`)

func fill(s string, vars map[string]string) string {
	return placeholderRE.ReplaceAllStringFunc(s, func(p string) string {
		name := placeholderRE.FindStringSubmatch(p)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		return p
	})
}

// numberRE is a tool argument that is one placeholder typed as a number:
// "{{amount:number}}" becomes the JSON number 42.5, not the string "42.5".
var numberRE = regexp.MustCompile(`^\{\{\s*([\w.\-]+):number\s*\}\}$`)

// fillValue fills placeholders in every string inside v (maps, slices). A
// string that is exactly "{{NAME:number}}" becomes a JSON number when the
// value parses as one (and stays the string otherwise).
func fillValue(v any, vars map[string]string) any {
	switch x := v.(type) {
	case string:
		if m := numberRE.FindStringSubmatch(x); m != nil {
			if f, err := strconv.ParseFloat(vars[m[1]], 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
			}
			return vars[m[1]]
		}
		return fill(x, vars)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fillValue(e, vars)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fillValue(e, vars)
		}
		return out
	}
	return v
}

// builtins returns the placeholder values every reply can use.
func builtins(c *Conversation) map[string]string {
	vars := map[string]string{
		"last_user":       c.LastUserText(),
		"model":           c.Model,
		"scenario":        c.Scenario(),
		"assistant_turns": strconv.Itoa(c.AssistantTurns()),
	}
	for i := len(c.Turns) - 1; i >= 0; i-- {
		if c.Turns[i].Role == "tool" {
			vars["last_tool_result"] = c.Turns[i].Text
			break
		}
	}
	return vars
}
