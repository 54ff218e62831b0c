package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	belayrun "github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

func traceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "trace",
		Short: "Show a run's trace, diff two runs, and keep golden traces",
	}
	c.AddCommand(traceShowCmd(), traceDiffCmd(), goldenCmd())
	return c
}

// runSpans returns a run's record and spans; an unknown run is exit 1.
func runSpans(ctx context.Context, st store.Store, id string) (store.Run, []trace.Span, error) {
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return run, nil, notFound(err, "run", id)
	}
	spans, err := st.RunSpans(ctx, id)
	return run, spans, err
}

func traceShowCmd() *cobra.Command {
	var asJSON, allAttrs bool
	c := &cobra.Command{
		Use:   "show RUN",
		Short: "Print a run's spans as a tree (run → model calls → attempts; tools) with key attributes and events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				run, spans, err := runSpans(ctx, st, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), nonNilSlice(liveCounts(run, spans)))
				}
				return writeTrace(cmd.OutOrStdout(), run, spans, allAttrs)
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the spans as JSON")
	c.Flags().BoolVar(&allAttrs, "attrs", false, "print every attribute, not only the key ones")
	return c
}

func traceDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "Diff the canonical traces of runs A and B (exit 0 equal, 1 different, 2 trouble)",
		Long: "Diff the canonical traces of two runs: ids, times, durations, token counts and cost are left out\n" +
			"(trace.DefaultVolatile), so the diff shows what the runs did differently: steps added, removed or\n" +
			"changed (status, events, attributes). Exit 0 when equal, 1 when different, 2 when a run is unknown\n" +
			"or the store cannot be read (as diff(1)).",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return diffExit(withStore(cmd, func(ctx context.Context, st store.Store) error {
				var canon [2][]byte
				for i, id := range args {
					_, spans, err := runSpans(ctx, st, id)
					if err != nil {
						return err
					}
					if canon[i], err = trace.Canonical(spans); err != nil {
						return fmt.Errorf("run %s: %w", id, err)
					}
				}
				return printDiff(cmd.OutOrStdout(), canon[0], canon[1], args[0], args[1])
			}))
		},
	}
}

// differError is printDiff's "the traces differ" (exit 1).
type differError struct{ msg string }

func (e differError) Error() string { return e.msg }

// diffExit gives a diff command's exit: nil (0) when equal, printDiff's
// error (1) when different, and any other error as exit 2 (an unknown run
// or golden, a store that cannot be read), so that a script tells a
// difference from a failure to compare.
func diffExit(err error) error {
	if _, ok := errors.AsType[differError](err); err == nil || ok {
		return err
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return exit(2, ee.err)
	}
	return exit(2, err)
}

// printDiff diffs two canonical traces, prints the result and returns
// exit 1 when they differ.
func printDiff(w io.Writer, a, b []byte, nameA, nameB string) error {
	d, err := trace.DiffCanonical(a, b)
	if err != nil {
		return err
	}
	if d.Equal() {
		fmt.Fprintf(w, "no differences between %s and %s\n", nameA, nameB)
		return nil
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n%s", nameA, nameB, d)
	steps := "steps"
	if len(d.Entries) == 1 {
		steps = "step"
	}
	return exit(1, differError{fmt.Sprintf("traces of %s and %s differ in %d %s", nameA, nameB, len(d.Entries), steps)})
}

func goldenCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "golden",
		Short: "Save a run's canonical trace as a named golden trace, show one, or diff a run against one",
	}
	save := &cobra.Command{
		Use:   "save RUN NAME",
		Short: "Store the canonical trace of RUN as golden NAME (replacing an older one)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, name := args[0], args[1]
			if err := trace.CheckGoldenName(name); err != nil {
				return badInput(err)
			}
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				run, spans, err := runSpans(ctx, st, id)
				if err != nil {
					return err
				}
				if run.Status == store.RunRunning {
					// Its trace may still grow: a golden of half a run
					// fails every whole run diffed against it.
					return exit(1, fmt.Errorf("run %s is still running: save it as a golden once it has ended (belay runs shows its status; belay kill run %s ends it)", id, id))
				}
				if len(spans) == 0 {
					return exit(1, fmt.Errorf("run %s has no spans", id))
				}
				canon, err := trace.Canonical(spans)
				if err != nil {
					return fmt.Errorf("run %s: %w", id, err)
				}
				if err := st.SaveGolden(ctx, name, id, canon); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "saved golden %s from run %s (%d steps)\n", name, id, bytesLines(canon))
				return nil
			})
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print golden NAME: one canonical step (JSON) per line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				canon, runID, err := st.Golden(ctx, args[0])
				if err != nil {
					return goldenNotFound(cmd, err, args[0])
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "golden %s, from run %s, %d steps\n", args[0], runID, bytesLines(canon))
				_, err = cmd.OutOrStdout().Write(canon)
				return err
			})
		},
	}
	diff := &cobra.Command{
		Use:   "diff NAME RUN",
		Short: "Diff RUN's canonical trace against golden NAME (exit 0 equal, 1 different, 2 trouble)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, id := args[0], args[1]
			return diffExit(withStore(cmd, func(ctx context.Context, st store.Store) error {
				golden, _, err := st.Golden(ctx, name)
				if err != nil {
					return goldenNotFound(cmd, err, name)
				}
				_, spans, err := runSpans(ctx, st, id)
				if err != nil {
					return err
				}
				canon, err := trace.Canonical(spans)
				if err != nil {
					return fmt.Errorf("run %s: %w", id, err)
				}
				return printDiff(cmd.OutOrStdout(), golden, canon, "golden "+name, "run "+id)
			}))
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the stored goldens: name, the run each was saved from, its size",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				gs, err := st.ListGoldens(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tRUN\tBYTES")
				for _, g := range gs {
					fmt.Fprintf(tw, "%s\t%s\t%d\n", g.Name, g.RunID, g.Bytes)
				}
				if len(gs) == 0 {
					fmt.Fprintln(tw, "(no goldens)")
				}
				return tw.Flush()
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Remove golden NAME (scenarios naming it compare nothing, or fail with golden_required)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withStore(cmd, func(ctx context.Context, st store.Store) error {
				if err := st.DeleteGolden(ctx, args[0]); err != nil {
					return goldenNotFound(cmd, err, args[0])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted golden %s\n", args[0])
				return nil
			})
		},
	}
	c.AddCommand(save, show, diff, list, del)
	return c
}

func bytesLines(b []byte) int { return strings.Count(string(b), "\n") }

// liveCounts returns spans with a running run's span given the record's
// counts (turns, tool calls, tokens, cost): the span was written when the
// run started, and its counts are the record's until the run ends
// (newcomer findings, sessions 3 and 4: it showed zeros under the header's
// counts, in the tree and in --json). Other spans are returned as they are.
func liveCounts(run store.Run, spans []trace.Span) []trace.Span {
	if run.Status != store.RunRunning {
		return spans
	}
	spans = slices.Clone(spans)
	for i, s := range spans {
		if s.Kind == trace.KindRun && s.End.IsZero() {
			a := maps.Clone(s.Attrs)
			if a == nil {
				a = map[string]any{}
			}
			a[trace.AttrInputTokens], a[trace.AttrOutputTokens] = run.InputTokens, run.OutputTokens
			a[trace.AttrCostUSD] = run.Cost.Float()
			a["belay.run.turns"], a["belay.run.tool_calls"] = int64(run.Turns), int64(run.ToolCalls)
			spans[i].Attrs = a
		}
	}
	return spans
}

// writeTrace prints a header from the run record, then the span tree.
func writeTrace(w io.Writer, run store.Run, spans []trace.Span, allAttrs bool) error {
	ew := &firstErrWriter{w: w}
	status := string(run.Status)
	if run.StopReason != "" {
		status += " (" + run.StopReason + ")"
	}
	cost := run.Cost.String()
	if run.CostEstimated { // as belay runs and the run's span line mark it (newcomer walkthrough)
		cost += " (estimated)"
	}
	fmt.Fprintf(ew, "run %s  tenant %s  agent %s  %s  turns %d  tool calls %d  tokens %d/%d  cost %s\n",
		run.ID, orDash(run.Tenant), orDash(run.Agent), status, run.Turns, run.ToolCalls, run.InputTokens, run.OutputTokens, cost)
	if len(spans) == 0 {
		fmt.Fprintln(ew, "(no spans)")
		return ew.err
	}
	t := newTree(liveCounts(run, spans))
	for _, i := range t.roots {
		t.write(ew, i, 0, allAttrs)
	}
	if !allAttrs && !slices.ContainsFunc(spans, hasMessages) && slices.ContainsFunc(spans, isModelCall) {
		if slices.ContainsFunc(spans, func(s trace.Span) bool { return s.Kind == trace.KindAttempt }) {
			fmt.Fprintln(ew, "(no messages recorded: a gateway records them unless its config says capture: off)")
		} else {
			// Its calls were all refused before any went upstream
			// (newcomer finding: the capture hint misled).
			fmt.Fprintln(ew, "(no messages: no call of the run reached a provider)")
		}
	}
	return ew.err
}

func hasMessages(s trace.Span) bool {
	_, in := s.Attrs[trace.AttrInputMessages]
	_, out := s.Attrs[trace.AttrOutputMessages]
	return in || out
}

func isModelCall(s trace.Span) bool { return s.Kind == trace.KindModel }

// tree orders spans by parent: children by start time, then span id. A span
// whose parent is not among the spans is a root.
type tree struct {
	spans    []trace.Span
	roots    []int
	children map[int][]int
	seen     map[int]bool
}

func newTree(spans []trace.Span) *tree {
	t := &tree{spans: spans, children: map[int][]int{}, seen: map[int]bool{}}
	byID := make(map[string]int, len(spans))
	for i, s := range spans {
		byID[s.SpanID] = i
	}
	for i, s := range spans {
		if p, ok := byID[s.ParentID]; ok && s.ParentID != "" && p != i {
			t.children[p] = append(t.children[p], i)
		} else {
			t.roots = append(t.roots, i)
		}
	}
	t.sort(t.roots)
	for _, c := range t.children {
		t.sort(c)
	}
	return t
}

func (t *tree) sort(ids []int) {
	slices.SortStableFunc(ids, func(a, b int) int {
		x, y := t.spans[a], t.spans[b]
		return cmp.Or(x.Start.Compare(y.Start), cmp.Compare(x.SpanID, y.SpanID))
	})
}

func (t *tree) write(w io.Writer, i, depth int, allAttrs bool) {
	if t.seen[i] { // a parent cycle: print each span once
		return
	}
	t.seen[i] = true
	s := t.spans[i]
	indent := strings.Repeat("  ", depth)
	attrs := keyAttrs(s.Attrs)
	if allAttrs {
		attrs = everyAttr(s.Attrs)
	}
	label := string(s.Kind) + " " + s.Name
	if strings.HasPrefix(s.Name, string(s.Kind)+" ") { // "attempt openai-a", not "attempt attempt openai-a"
		label = s.Name
	}
	if alias, ok := s.Attrs[trace.AttrAlias].(string); ok && alias != "" && s.Kind == trace.KindModel && !strings.HasSuffix(s.Name, " "+alias) {
		// The span is named for the provider's model; the caller asked for the alias.
		label += " (as " + escapeControl(alias) + ")"
	}
	fmt.Fprintf(w, "%s%s  %s  %s", indent, label, orDash(string(s.Status)), spanDuration(s))
	if len(attrs) > 0 {
		fmt.Fprintf(w, "  %s", strings.Join(attrs, " "))
	}
	fmt.Fprintln(w)
	if !allAttrs { // --attrs prints the messages whole, as attributes
		if l := promptLine(s.Attrs[trace.AttrInputMessages]); l != "" {
			fmt.Fprintf(w, "%s  < %s\n", indent, l)
		}
		for _, l := range answerLines(s.Attrs[trace.AttrOutputMessages]) {
			fmt.Fprintf(w, "%s  > %s\n", indent, l)
		}
		if msg, ok := s.Attrs[trace.AttrFailureMessage].(string); ok && msg != "" && s.Status == trace.StatusError {
			fmt.Fprintf(w, "%s  x %s\n", indent, shorten(escapeControl(msg)))
		}
	}
	for _, e := range s.Events {
		fmt.Fprintf(w, "%s  ! %s +%s", indent, e.Name, shortDuration(e.Time.Sub(s.Start)))
		if ea := everyAttr(e.Attrs); len(ea) > 0 {
			fmt.Fprintf(w, "  %s", strings.Join(ea, " "))
		}
		fmt.Fprintln(w)
	}
	for _, c := range t.children[i] {
		t.write(w, c, depth+1, allAttrs)
	}
}

// answerMax is the most characters of one part of an answer trace show
// prints; a longer part ends with how many more there are.
const answerMax = 300

// answerLines summarizes a model call's recorded answer (the
// gen_ai.output.messages attribute: a JSON string, or its decoded value)
// as lines: each text part quoted, each tool call as name(arguments),
// thinking quoted after "thinking", each part cut at answerMax characters
// with the count of the rest, control characters escaped (an answer cannot
// forge a line of the tree or reach the terminal). The arguments are shown
// as the model sent them (numbers and characters unchanged). It reads the
// shapes the gateway records, OpenAI's choices (message.content as a
// string or parts, message.refusal, message.tool_calls, function or
// custom) and Anthropic's content blocks (text, thinking,
// redacted_thinking, tool_use), and OpenTelemetry GenAI output messages
// (parts of type text and tool_call); of several choices each line says
// which. A value of another shape is printed as compact JSON. Nil or an
// empty string: no lines.
func answerLines(v any) []string {
	if s, ok := v.(string); ok {
		if s == "" {
			return nil
		}
		if v, ok = decodePayload(s); !ok {
			return []string{quoteText(s)}
		}
	}
	if v == nil {
		return nil
	}
	items, ok := v.([]any)
	if !ok {
		if s, ok := v.(string); ok {
			return []string{quoteText(s)}
		}
		return []string{shorten(compactJSON(v))}
	}
	var out []string
	prefix := ""
	emit := func(l string) { out = append(out, prefix+l) }
	text := func(x any) {
		if t, ok := x.(string); ok && t != "" {
			emit(quoteText(t))
		}
	}
	call := func(name, args any) {
		n, _ := name.(string)
		a, ok := args.(string)
		if !ok && args != nil {
			a = compactJSON(args)
		}
		emit(shorten("tool call " + escapeControl(n) + "(" + escapeControl(a) + ")"))
	}
	part := func(p map[string]any) {
		switch p["type"] {
		case "text", "output_text": // output_text: a Responses message's part
			text(p["text"])
			text(p["content"]) // OpenTelemetry GenAI text part
		case "thinking":
			if t, ok := p["thinking"].(string); ok {
				emit("thinking " + quoteText(t))
			}
		case "redacted_thinking":
			emit("(redacted thinking)")
		case "tool_use", "server_tool_use":
			call(p["name"], p["input"])
		case "tool_call", "function_call": // function_call: a Responses output item
			call(p["name"], p["arguments"])
		case "reasoning": // a Responses output item: its summary, when there is one
			if sum, ok := p["summary"].([]any); ok {
				for _, s := range sum {
					if sm, ok := s.(map[string]any); ok {
						if t, ok := sm["text"].(string); ok && t != "" {
							emit("reasoning " + quoteText(t))
						}
					}
				}
			}
		case "refusal":
			text(p["refusal"])
		}
	}
	choices := 0
	for _, it := range items {
		if m, ok := it.(map[string]any); ok && m["message"] != nil {
			choices++
		}
	}
	for _, it := range items {
		m, _ := it.(map[string]any)
		if msg, ok := m["message"].(map[string]any); ok { // an OpenAI choice
			if choices > 1 {
				prefix = fmt.Sprintf("[choice %s] ", attrString(m["index"]))
			}
			m = msg
		}
		switch c := m["content"].(type) {
		case string:
			text(c)
		case []any:
			for _, p := range c {
				if pm, ok := p.(map[string]any); ok {
					part(pm)
				}
			}
		}
		if r, ok := m["refusal"].(string); ok && r != "" {
			emit("refusal " + quoteText(r))
		}
		if tcs, ok := m["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				tm, _ := tc.(map[string]any)
				if f, ok := tm["function"].(map[string]any); ok {
					call(f["name"], f["arguments"])
				} else if cu, ok := tm["custom"].(map[string]any); ok { // an OpenAI custom tool
					call(cu["name"], cu["input"])
				}
			}
		}
		if parts, ok := m["parts"].([]any); ok { // an OpenTelemetry GenAI message
			for _, p := range parts {
				if pm, ok := p.(map[string]any); ok {
					part(pm)
				}
			}
		}
		if _, ok := m["type"]; ok { // an Anthropic content block
			part(m)
		}
	}
	if len(out) == 0 {
		return []string{shorten(compactJSON(v))}
	}
	return out
}

// promptLine summarizes a model call's recorded input (the
// gen_ai.input.messages attribute: OpenAI's messages array, Anthropic's
// {"system", "messages"}, or a Responses input: a string, an array of
// items, or {"instructions", "input"}) by its last message or item, the
// one the call answers:
// its role and text parts, quoted and cut as answerLines cuts them (a
// tool result says so). "" when there is none.
func promptLine(v any) string {
	if s, ok := v.(string); ok {
		if s == "" {
			return ""
		}
		if v, ok = decodePayload(s); !ok {
			return quoteText(s)
		}
	}
	if m, ok := v.(map[string]any); ok { // Anthropic: {"system", "messages"}; Responses: {"instructions", "input"}
		if in, ok := m["input"]; ok {
			v = in
		} else {
			v = m["messages"]
		}
	}
	if s, ok := v.(string); ok { // a Responses input of one string: the user's
		return "user " + quoteText(s)
	}
	msgs, _ := v.([]any)
	if len(msgs) == 0 {
		return ""
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	if last["type"] == "function_call" { // a Responses item: the model's own call, sent back
		n, _ := last["name"].(string)
		a, _ := last["arguments"].(string)
		return shorten("tool call " + escapeControl(n) + "(" + escapeControl(a) + ")")
	}
	role, texts := messageTexts(last)
	if role == "tool result" {
		// The results of parallel tool calls are as many messages (chat)
		// or items (Responses) in a row: all of them are the prompt's end
		// (an Agents SDK test saw only the last of two).
		for i := len(msgs) - 2; i >= 0; i-- {
			m, _ := msgs[i].(map[string]any)
			r, t := messageTexts(m)
			if r != "tool result" || m["role"] == "user" { // an Anthropic user message ends the run
				break
			}
			texts = append(t, texts...)
		}
	}
	return escapeControl(role) + " " + quoteText(strings.Join(texts, " "))
}

// messageTexts returns a recorded message's role and its text parts (a
// tool result's content): a chat or Anthropic message, or a Responses
// function_call_output item (role "tool result"). A chat "tool" message
// and a message of Anthropic tool_result blocks read "tool result" too.
func messageTexts(m map[string]any) (role string, texts []string) {
	role, _ = m["role"].(string)
	if m["type"] == "function_call_output" {
		role, m = "tool result", map[string]any{"content": m["output"]}
	}
	switch c := m["content"].(type) {
	case string:
		texts = append(texts, c)
	case []any:
		for _, p := range c {
			pm, _ := p.(map[string]any)
			switch pm["type"] {
			case "text", "input_text", "output_text": // input_text, output_text: Responses
				if t, ok := pm["text"].(string); ok {
					texts = append(texts, t)
				}
			case "tool_result": // Anthropic
				role = "tool result"
				switch rc := pm["content"].(type) {
				case string:
					texts = append(texts, rc)
				default:
					texts = append(texts, compactJSON(rc))
				}
			}
		}
	}
	if role == "tool" {
		role = "tool result"
	}
	return role, texts
}

// decodePayload decodes a recorded payload, one JSON value, with numbers
// as json.Number (their digits kept); false when s is not one.
func decodePayload(s string) (any, bool) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	return v, true
}

// quoteText quotes s (strconv.Quote) after cutting it at answerMax
// characters, saying how many more there were.
func quoteText(s string) string { return cut(s, strconv.Quote) }

// shorten cuts s (already free of control characters) to answerMax
// characters, saying how many more there were.
func shorten(s string) string { return cut(s, func(s string) string { return s }) }

// cut shows s with show, cut at answerMax characters first, saying how many
// more there were.
func cut(s string, show func(string) string) string {
	r := []rune(s)
	if len(r) <= answerMax {
		return show(s)
	}
	return fmt.Sprintf("%s… (%d more characters; --attrs prints all)", show(string(r[:answerMax])), len(r)-answerMax)
}

// compactJSON encodes v as compact JSON without HTML escaping (numbers
// decoded as json.Number keep their digits).
func compactJSON(v any) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return escapeControl(fmt.Sprint(v))
	}
	return escapeControl(strings.TrimSuffix(b.String(), "\n"))
}

// escapeControl returns s with control characters and invalid UTF-8
// escaped as Go escapes them (\n, \x1b, \u0085), other characters as
// they are.
func escapeControl(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case isControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// isControl reports whether r is a control character, or a format
// character that reorders or hides text on a terminal (bidirectional
// overrides, isolates and marks: U+061C, U+200E–U+200F, U+202A–U+202E,
// U+2066–U+2069): a provider's message could otherwise forge a line.
func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r < 0xa0 || r == 0x61c || r == 0x200e || r == 0x200f ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

func spanDuration(s trace.Span) string {
	if s.End.IsZero() || s.End.Before(s.Start) {
		return "open"
	}
	return shortDuration(s.End.Sub(s.Start)).String()
}

// keyAttrs picks the attributes an operator looks at first, as label=value.
func keyAttrs(a map[string]any) []string {
	var out []string
	add := func(label string, keys ...string) {
		for _, k := range keys {
			if v, ok := a[k]; ok && attrString(v) != "" {
				out = append(out, label+"="+attrString(v))
				return
			}
		}
	}
	add("tenant", trace.AttrTenant)
	add("status", trace.AttrRunStatus)
	add("stop_reason", trace.AttrStopReason)
	add("model", trace.AttrResponseModel, trace.AttrRequestModel)
	if a[trace.AttrOpenAIAPIType] == "responses" { // chat completions, the usual API, go without a word
		out = append(out, "api=responses")
	}
	add("deployment", trace.AttrDeployment)
	add("attempt", trace.AttrAttempt)
	_, in := a[trace.AttrInputTokens]
	_, outTok := a[trace.AttrOutputTokens]
	if in || outTok {
		out = append(out, fmt.Sprintf("tokens=%s/%s", attrOr(a, trace.AttrInputTokens), attrOr(a, trace.AttrOutputTokens)))
	}
	if v, ok := a[trace.AttrCostUSD]; ok {
		c := "cost=$" + attrString(v)
		if a[trace.AttrCostEstimated] == true { // part of the usage was estimated (a cut answer, a lost attempt)
			c += " (estimated)"
		}
		out = append(out, c)
	}
	add("wait_ms", trace.AttrWaitMS)
	if _, stop := a[trace.AttrStopReason]; !stop { // a run's failure reason is its stop reason
		add("failure", trace.AttrFailureReason, trace.AttrErrorType)
	}
	add("kind", trace.AttrFailureKind)
	add("breaker", trace.AttrBreakerState)
	add("degraded", trace.AttrDegraded)
	add("tool", trace.AttrToolName)
	add("approval", trace.AttrApproval)
	add("approval_state", "belay.approval.state")
	add("approved_by", "belay.approval.by")
	add("outcome", trace.AttrToolOutcome)
	if n, ok := a[belayrun.AttrToolAttempts]; ok && attrString(n) != "1" {
		out = append(out, "tries="+attrString(n))
		if errs, ok := a[belayrun.AttrToolRetriedErrors]; ok {
			out = append(out, "retried_after="+attrString(errs))
		}
	}
	return out
}

func attrOr(a map[string]any, k string) string {
	if v, ok := a[k]; ok {
		return attrString(v)
	}
	return "-"
}

// everyAttr lists all attributes as key=value, sorted by key, control
// characters escaped (escapeControl).
func everyAttr(a map[string]any) []string {
	out := make([]string, 0, len(a))
	for _, k := range slices.Sorted(maps.Keys(a)) {
		out = append(out, escapeControl(k+"="+attrString(a[k])))
	}
	return out
}

// attrString formats an attribute value: strings as they are, numbers in
// their shortest form, anything else as compact JSON.
func attrString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	case time.Duration:
		return x.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// firstErrWriter remembers the first write error and drops later writes.
type firstErrWriter struct {
	w   io.Writer
	err error
}

func (e *firstErrWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
