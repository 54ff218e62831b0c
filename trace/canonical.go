package trace

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/belay-run/belay/internal/jsonnum"
)

// Step is one span in canonical form: what the run did, without when, how
// long, or under which ids. Path is the span's structural position: the
// index of each ancestor among its siblings, joined by dots ("0" is the
// first root, "0.2" its third child).
type Step struct {
	Path   string         `json:"path"`
	Kind   SpanKind       `json:"kind"`
	Name   string         `json:"name"`
	Status Status         `json:"status,omitempty"`
	Attrs  map[string]any `json:"attrs,omitempty"`
	Events []StepEvent    `json:"events,omitempty"`
}

// StepEvent is an event in canonical form (no time).
type StepEvent struct {
	Name  string         `json:"name"`
	Attrs map[string]any `json:"attrs,omitempty"`
}

// DefaultVolatile lists the attributes that vary between two runs doing the
// same thing, and so are left out of the canonical form:
//   - ids: tool call, conversation, response, request and approval ids,
//     idempotency keys, and any event attribute named "id";
//   - failure messages (they quote retry delays and request ids; the kind
//     and reason stay);
//   - timing: belay.wait_ms, belay.latency_ms;
//   - token counts and cost: they move with sampling and token estimates
//     even when the behaviour is the same, so cost is judged by budgets and
//     the run's stop reason, not by the golden diff.
//
// Span, trace, parent and run ids, timestamps and durations are never part
// of the canonical form.
var DefaultVolatile = []string{
	AttrToolCallID, AttrConversationID, AttrResponseID, AttrRequestID, AttrIdempotency, AttrApproval, "id",
	AttrFailureMessage,
	AttrWaitMS, AttrLatencyMS,
	AttrInputTokens, AttrOutputTokens, AttrCachedInputTokens, AttrCacheWriteTokens, AttrCacheWrite1hTokens, AttrReasoningTokens,
	AttrCostUSD, AttrCostEstimated,
}

// CanonicalOptions tune the canonical form.
type CanonicalOptions struct {
	// Volatile lists attribute names removed from spans and events. nil
	// means DefaultVolatile; an empty non-nil slice keeps every attribute.
	Volatile []string
}

// Canonical is CanonicalOptions{}.Canonical.
func Canonical(spans []Span) ([]byte, error) { return CanonicalOptions{}.Canonical(spans) }

// CanonicalSteps is CanonicalOptions{}.Steps.
func CanonicalSteps(spans []Span) ([]Step, error) { return CanonicalOptions{}.Steps(spans) }

// Canonical returns spans in canonical form: one JSON Step per line, in tree
// order, object keys sorted, no HTML escaping. Two runs that differ only in
// ids, timestamps, durations and volatile attributes give equal bytes. The
// error is from JSON encoding an attribute value (a channel, NaN).
func (o CanonicalOptions) Canonical(spans []Span) ([]byte, error) {
	steps, err := o.Steps(spans)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, s := range steps {
		if err := enc.Encode(s); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// Steps returns spans as canonical steps in tree order: depth first, roots
// and siblings ordered by start time, then name, then content. A span whose
// parent is missing is a root; of spans sharing a SpanID the last one wins
// (a span written at start and again at end). Attribute values are
// normalized through JSON (integers and floats compare equal, as they do
// after a store round trip).
func (o CanonicalOptions) Steps(spans []Span) ([]Step, error) {
	volatile := o.Volatile
	if volatile == nil {
		volatile = DefaultVolatile
	}
	spans = dedupe(spans)
	nodes := make([]node, len(spans))
	byID := make(map[string]int, len(spans))
	for i, s := range spans {
		st, err := canonicalStep(s, volatile)
		if err != nil {
			return nil, fmt.Errorf("trace: span %q: %w", s.Name, err)
		}
		key, err := json.Marshal(st)
		if err != nil {
			return nil, err
		}
		nodes[i] = node{span: &spans[i], step: st, key: string(key)}
		if s.SpanID != "" {
			byID[s.SpanID] = i
		}
	}
	var roots []int
	children := make(map[int][]int)
	for i, s := range spans {
		p, ok := byID[s.ParentID]
		if s.ParentID == "" || !ok || p == i {
			roots = append(roots, i)
			continue
		}
		children[p] = append(children[p], i)
	}
	w := walker{nodes: nodes, children: children, seen: make([]bool, len(nodes))}
	w.walk(roots, "")
	// Spans caught in a parent cycle are reached from no root: the first of
	// each cycle (in sibling order) becomes a root, so that nothing is lost.
	var rest []int
	for i := range nodes {
		if !w.seen[i] {
			rest = append(rest, i)
		}
	}
	w.walk(rest, "")
	return w.out, nil
}

type node struct {
	span *Span
	step Step
	key  string // the step's JSON, the last tie-breaker
}

type walker struct {
	nodes    []node
	children map[int][]int
	seen     []bool
	out      []Step
	roots    int
}

// walk appends ids and their subtrees in order; prefix is the parent's path.
func (w *walker) walk(ids []int, prefix string) {
	slices.SortFunc(ids, func(a, b int) int {
		x, y := w.nodes[a], w.nodes[b]
		return cmp.Or(x.span.Start.Compare(y.span.Start), cmp.Compare(x.span.Name, y.span.Name),
			cmp.Compare(x.key, y.key))
	})
	i := 0
	for _, id := range ids {
		if w.seen[id] {
			continue
		}
		w.seen[id] = true
		st := w.nodes[id].step
		if prefix == "" {
			st.Path = strconv.Itoa(w.roots)
			w.roots++
		} else {
			st.Path = prefix + "." + strconv.Itoa(i)
		}
		i++
		w.out = append(w.out, st)
		w.walk(w.children[id], st.Path)
	}
}

// dedupe keeps the last span of each SpanID, in first-seen order.
func dedupe(spans []Span) []Span {
	last := make(map[string]int, len(spans))
	for i, s := range spans {
		if s.SpanID != "" {
			last[s.SpanID] = i
		}
	}
	if len(last) == len(spans) {
		return spans
	}
	out := make([]Span, 0, len(last))
	for i, s := range spans {
		if s.SpanID == "" || last[s.SpanID] == i {
			out = append(out, s)
		}
	}
	return out
}

func canonicalStep(s Span, volatile []string) (Step, error) {
	attrs, err := normalize(s.Attrs, volatile)
	if err != nil {
		return Step{}, err
	}
	if slices.Contains(volatile, AttrToolCallID) {
		renumberPayloadIDs(attrs)
	}
	if args, ok := attrs[AttrToolArguments].(string); ok {
		attrs[AttrToolArguments] = canonicalArguments(args)
	}
	st := Step{Kind: s.Kind, Name: s.Name, Status: s.Status, Attrs: attrs}
	events := slices.Clone(s.Events)
	slices.SortStableFunc(events, func(a, b Event) int { return a.Time.Compare(b.Time) })
	for _, e := range events {
		ea, err := normalize(e.Attrs, volatile)
		if err != nil {
			return Step{}, fmt.Errorf("event %q: %w", e.Name, err)
		}
		st.Events = append(st.Events, StepEvent{Name: e.Name, Attrs: ea})
	}
	return st, nil
}

// canonicalArguments returns a tool call's arguments, when they are one
// JSON document, compact, with object keys sorted and each number written
// one way for its value (jsonnum.Canonical, exact: 50 and 50.0 are one
// value, two order ids past 2^53 stay two): the same call written with
// other spacing, member order or number spelling is the same step (an
// adversarial review found such runs unequal to their golden). Other
// text is kept as it is.
func canonicalArguments(args string) string {
	d := json.NewDecoder(strings.NewReader(args))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return args
	}
	if _, err := d.Token(); err != io.EOF {
		return args // more than one document
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(canonicalNumbers(v)) != nil {
		return args
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// canonicalNumbers returns v (decoded with UseNumber) with each number in
// jsonnum's canonical form.
func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return json.Number(jsonnum.Canonical(string(x)))
	case map[string]any:
		for k, e := range x {
			x[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonicalNumbers(e)
		}
	}
	return v
}

// normalize returns attrs without volatile keys, with values passed through
// JSON so that equal values have equal Go types.
func normalize(attrs map[string]any, volatile []string) (map[string]any, error) {
	out := make(map[string]any, len(attrs))
	for k, v := range attrs {
		if slices.Contains(volatile, k) {
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		var nv any
		if err := json.Unmarshal(b, &nv); err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = nv
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// payloadIDKeys are the keys under which the captured messages carry tool
// call ids: OpenAI's tool_calls[].id and tool messages' tool_call_id,
// Anthropic's tool_use blocks' id and tool_result blocks' tool_use_id.
var payloadIDKeys = []string{"id", "tool_call_id", "tool_use_id"}

// renumberPayloadIDs replaces the tool call ids inside the captured
// messages of one span (gen_ai.input.messages, gen_ai.output.messages,
// JSON text) by "id-1", "id-2", … in the order they first appear, so that
// two runs whose calls differ only in the provider's random ids compare
// equal, while a result that answers another call than before still
// differs. A payload that is not JSON is left as it is.
func renumberPayloadIDs(attrs map[string]any) {
	seen := map[string]string{}
	for _, k := range []string{AttrInputMessages, AttrOutputMessages} {
		text, ok := attrs[k].(string)
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal([]byte(text), &v) != nil {
			continue
		}
		v = renumber(v, seen)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			attrs[k] = strings.TrimSuffix(buf.String(), "\n")
		}
	}
}

func renumber(v any, seen map[string]string) any {
	switch x := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x)) // a fixed order: the numbering must not depend on map order
		for _, k := range keys {
			e := x[k]
			if id, ok := e.(string); ok && id != "" && slices.Contains(payloadIDKeys, k) {
				if _, ok := seen[id]; !ok {
					seen[id] = "id-" + strconv.Itoa(len(seen)+1)
				}
				x[k] = seen[id]
				continue
			}
			x[k] = renumber(e, seen)
		}
	case []any:
		for i, e := range x {
			x[i] = renumber(e, seen)
		}
	}
	return v
}

// ParseCanonical reads the output of Canonical back into steps.
func ParseCanonical(b []byte) ([]Step, error) {
	var steps []Step
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var s Step
		if err := json.Unmarshal([]byte(text), &s); err != nil {
			return nil, fmt.Errorf("trace: canonical line %d: %w", line, err)
		}
		if args, ok := s.Attrs[AttrToolArguments].(string); ok {
			// A golden saved before arguments were canonical compares
			// as one saved since.
			s.Attrs[AttrToolArguments] = canonicalArguments(args)
		}
		steps = append(steps, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace: canonical: %w", err)
	}
	return steps, nil
}
