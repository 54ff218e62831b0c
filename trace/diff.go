package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// DiffOp is the kind of a difference: a step added, removed or changed.
type DiffOp byte

const (
	Added   DiffOp = '+'
	Removed DiffOp = '-'
	Changed DiffOp = '~'
)

// Change is one field of a step that differs: "status", "events", or an
// attribute name. Old or New is absent when the attribute exists on one side
// only.
type Change struct {
	Field          string
	Old, New       any
	HadOld, HasNew bool
}

// DiffEntry is one added, removed or changed step. Index is the step's
// 1-based position in the old list for Removed, in the new list otherwise.
type DiffEntry struct {
	Op      DiffOp
	Index   int
	Step    Step
	Changes []Change // for Changed
}

// DiffResult lists the differences between two canonical traces, in the
// order of the traces.
type DiffResult struct {
	Entries []DiffEntry
}

// Equal reports whether the traces have no difference.
func (d DiffResult) Equal() bool { return len(d.Entries) == 0 }

// String renders one line per added or removed step and one per changed
// field:
//
//	~ step 3 execute_tool issue_refund: gen_ai.tool.call.arguments {"amount":10} -> {"amount":20}
//	+ step 5 execute_tool send_email
//	- step 4 chat gpt-4o
//
// String values are shown as they are, other values as compact JSON, a
// missing attribute as (absent). An equal result is the empty string.
func (d DiffResult) String() string {
	var b strings.Builder
	for _, e := range d.Entries {
		if e.Op != Changed {
			fmt.Fprintf(&b, "%c step %d %s\n", e.Op, e.Index, e.Step.Name)
			continue
		}
		for _, c := range e.Changes {
			fmt.Fprintf(&b, "~ step %d %s: %s %s -> %s\n", e.Index, e.Step.Name, c.Field,
				render(c.Old, c.HadOld), render(c.New, c.HasNew))
		}
	}
	return b.String()
}

func render(v any, present bool) string {
	if !present {
		return "(absent)"
	}
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// DiffCanonical parses two outputs of Canonical and diffs them.
func DiffCanonical(a, b []byte) (DiffResult, error) {
	sa, err := ParseCanonical(a)
	if err != nil {
		return DiffResult{}, err
	}
	sb, err := ParseCanonical(b)
	if err != nil {
		return DiffResult{}, err
	}
	return Diff(sa, sb), nil
}

// Diff aligns a (old, e.g. the golden trace) and b (new) by a longest common
// subsequence over their steps keyed by kind and name, then compares each
// aligned pair's status, attributes and events. Unaligned steps are Removed
// (from a) or Added (to b). Paths are not compared: a step inserted earlier
// shifts its siblings' paths without changing what they did. A step's
// ancestry is (the kinds and names of the steps above it, from the run
// down): a tool call made inside a model call's attempt is not the same
// step as one the run made, and shows as a change of "parent" (an
// adversarial review found the two trees comparing equal).
//
// Cost: O(n·m) time and memory after trimming the common prefix and suffix;
// past 2^24 cells the middle is reported as removed and added whole.
func Diff(a, b []Step) DiffResult {
	var d DiffResult
	upA, upB := ancestries(a), ancestries(b)
	for _, p := range align(a, b) {
		i, j := p[0], p[1]
		switch {
		case i < 0:
			d.Entries = append(d.Entries, DiffEntry{Op: Added, Index: j + 1, Step: b[j]})
		case j < 0:
			d.Entries = append(d.Entries, DiffEntry{Op: Removed, Index: i + 1, Step: a[i]})
		default:
			ch := compareSteps(a[i], b[j])
			if upA[i] != upB[j] {
				ch = append([]Change{{Field: "parent", Old: upA[i], New: upB[j], HadOld: true, HasNew: true}}, ch...)
			}
			if len(ch) > 0 {
				d.Entries = append(d.Entries, DiffEntry{Op: Changed, Index: j + 1, Step: b[j], Changes: ch})
			}
		}
	}
	return d
}

func stepKey(s Step) string { return string(s.Kind) + "\x00" + s.Name }

// ancestries returns, for each step, the kinds and names of the steps
// above it, nearest last ("run invoke_agent a > model chat m"); "" for a
// root. A parent path missing from steps (a hand-edited golden) is named
// by its path.
func ancestries(steps []Step) []string {
	byPath := make(map[string]Step, len(steps))
	for _, s := range steps {
		byPath[s.Path] = s
	}
	out := make([]string, len(steps))
	for i, s := range steps {
		var up []string
		for p := s.Path; ; {
			k := strings.LastIndexByte(p, '.')
			if k < 0 {
				break
			}
			p = p[:k]
			if ps, ok := byPath[p]; ok {
				up = append(up, string(ps.Kind)+" "+ps.Name)
			} else {
				up = append(up, "step "+p)
			}
		}
		slices.Reverse(up)
		out[i] = strings.Join(up, " > ")
	}
	return out
}

// align returns the alignment in order: {i, j} for a pair, {i, -1} for a
// step only in a, {-1, j} for a step only in b. Within a region of
// differences, removals come before additions.
func align(a, b []Step) [][2]int {
	pre := 0
	for pre < len(a) && pre < len(b) && stepKey(a[pre]) == stepKey(b[pre]) {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && stepKey(a[len(a)-1-suf]) == stepKey(b[len(b)-1-suf]) {
		suf++
	}
	out := make([][2]int, 0, max(len(a), len(b)))
	for i := range pre {
		out = append(out, [2]int{i, i})
	}
	for _, p := range lcs(a[pre:len(a)-suf], b[pre:len(b)-suf]) {
		for k := range p {
			if p[k] >= 0 {
				p[k] += pre
			}
		}
		out = append(out, p)
	}
	for k := range suf {
		out = append(out, [2]int{len(a) - suf + k, len(b) - suf + k})
	}
	return out
}

// lcs aligns a and b by a longest common subsequence of keys.
func lcs(a, b []Step) [][2]int {
	n, m := len(a), len(b)
	var out [][2]int
	if n*m > 1<<24 || n == 0 || m == 0 {
		for i := range n {
			out = append(out, [2]int{i, -1})
		}
		for j := range m {
			out = append(out, [2]int{-1, j})
		}
		return out
	}
	ka, kb := make([]string, n), make([]string, m)
	for i := range a {
		ka[i] = stepKey(a[i])
	}
	for j := range b {
		kb[j] = stepKey(b[j])
	}
	// t[i][j] is the LCS length of a[i:] and b[j:].
	w := m + 1
	t := make([]int32, (n+1)*w)
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if ka[i] == kb[j] {
				t[i*w+j] = t[(i+1)*w+j+1] + 1
			} else {
				t[i*w+j] = max(t[(i+1)*w+j], t[i*w+j+1])
			}
		}
	}
	var adds []int
	flush := func() {
		for _, j := range adds {
			out = append(out, [2]int{-1, j})
		}
		adds = adds[:0]
	}
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case ka[i] == kb[j]:
			flush()
			out = append(out, [2]int{i, j})
			i++
			j++
		case t[(i+1)*w+j] >= t[i*w+j+1]:
			out = append(out, [2]int{i, -1})
			i++
		default:
			adds = append(adds, j)
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, [2]int{i, -1})
	}
	for ; j < m; j++ {
		adds = append(adds, j)
	}
	flush()
	return out
}

// compareSteps lists the fields of b that differ from a: status, then
// attributes by name, then events.
func compareSteps(a, b Step) []Change {
	var ch []Change
	if a.Status != b.Status {
		ch = append(ch, Change{Field: "status", Old: string(a.Status), New: string(b.Status), HadOld: true, HasNew: true})
	}
	keys := slices.Sorted(maps.Keys(a.Attrs))
	for k := range b.Attrs {
		if _, ok := a.Attrs[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		va, oka := a.Attrs[k]
		vb, okb := b.Attrs[k]
		if oka != okb || !reflect.DeepEqual(va, vb) {
			ch = append(ch, Change{Field: k, Old: va, New: vb, HadOld: oka, HasNew: okb})
		}
	}
	if !reflect.DeepEqual(a.Events, b.Events) && !(len(a.Events) == 0 && len(b.Events) == 0) {
		ch = append(ch, Change{Field: "events", Old: eventNames(a.Events), New: eventNames(b.Events), HadOld: true, HasNew: true})
	}
	return ch
}

// eventNames summarizes events for display: names, with attributes when any.
func eventNames(es []StepEvent) []any {
	out := make([]any, 0, len(es))
	for _, e := range es {
		if len(e.Attrs) == 0 {
			out = append(out, e.Name)
		} else {
			out = append(out, map[string]any{e.Name: e.Attrs})
		}
	}
	return out
}
