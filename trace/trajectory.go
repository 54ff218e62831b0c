package trace

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MatchMode says how an actual tool-call sequence must relate to the
// expected one. The four modes are those of golden-trajectory evaluation
// (as in LangChain's agentevals trajectory match).
type MatchMode string

const (
	// MatchStrict: the same calls in the same order.
	MatchStrict MatchMode = "strict"
	// MatchUnordered: the same calls, each as many times, in any order.
	MatchUnordered MatchMode = "unordered"
	// MatchSubset: every expected call happened (as many times at least);
	// other calls may have happened too.
	MatchSubset MatchMode = "subset"
	// MatchSuperset: every call that happened was expected (no more times
	// than expected); expected calls may be missing.
	MatchSuperset MatchMode = "superset"
)

// ParseMatchMode parses a config value; "" is strict. Anything else is an
// error wrapping ErrInvalidConfig.
func ParseMatchMode(s string) (MatchMode, error) {
	switch m := MatchMode(s); m {
	case "":
		return MatchStrict, nil
	case MatchStrict, MatchUnordered, MatchSubset, MatchSuperset:
		return m, nil
	}
	return "", fmt.Errorf("%w: unknown trajectory match %q (allowed: strict, unordered, subset, superset)",
		ErrInvalidConfig, s)
}

// MatchTrajectory reports whether actual matches expected under mode, and
// if not, why: the first differing position for strict, the missing and
// extra calls (with counts) otherwise. An unknown mode does not match.
func MatchTrajectory(expected, actual []string, mode MatchMode) (bool, string) {
	switch mode {
	case MatchStrict:
		for i := range max(len(expected), len(actual)) {
			e, a := at(expected, i), at(actual, i)
			if e != a {
				return false, fmt.Sprintf("call %d: expected %s, got %s", i+1, e, a)
			}
		}
		return true, ""
	case MatchUnordered, MatchSubset, MatchSuperset:
		missing, extra := multisetDiff(expected, actual)
		var why []string
		if len(missing) > 0 && mode != MatchSuperset {
			why = append(why, "missing "+countList(missing))
		}
		if len(extra) > 0 && mode != MatchSubset {
			why = append(why, "unexpected "+countList(extra))
		}
		return len(why) == 0, strings.Join(why, "; ")
	}
	return false, fmt.Sprintf("unknown trajectory match %q", mode)
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(nothing)"
}

// multisetDiff returns expected minus actual and actual minus expected, as
// counts.
func multisetDiff(expected, actual []string) (missing, extra map[string]int) {
	count := make(map[string]int)
	for _, e := range expected {
		count[e]++
	}
	for _, a := range actual {
		count[a]--
	}
	missing, extra = map[string]int{}, map[string]int{}
	for k, n := range count {
		switch {
		case n > 0:
			missing[k] = n
		case n < 0:
			extra[k] = -n
		}
	}
	return missing, extra
}

// countList renders {"a":1,"b":2} as "a, b x2".
func countList(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] == 1 {
			parts = append(parts, k)
		} else {
			parts = append(parts, fmt.Sprintf("%s x%d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

// ToolCalls returns the tools a run called, in canonical order (see
// CanonicalOptions.Steps): the gen_ai.tool.name of each tool span, or its
// name without the "execute_tool " prefix.
func ToolCalls(spans []Span) []string {
	steps, err := CanonicalOptions{Volatile: []string{}}.Steps(toolOrdering(spans))
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range steps {
		if s.Kind != KindTool {
			continue
		}
		if name, ok := s.Attrs[AttrToolName].(string); ok && name != "" {
			out = append(out, name)
		} else {
			out = append(out, strings.TrimPrefix(s.Name, "execute_tool "))
		}
	}
	return out
}

// toolOrdering keeps only what ordering and naming need, so that attribute
// values that do not encode as JSON cannot make ToolCalls fail.
func toolOrdering(spans []Span) []Span {
	out := make([]Span, len(spans))
	for i, s := range spans {
		out[i] = Span{SpanID: s.SpanID, ParentID: s.ParentID, Kind: s.Kind, Name: s.Name, Start: s.Start}
		if name, ok := s.Attrs[AttrToolName]; ok {
			out[i].Attrs = map[string]any{AttrToolName: name}
		}
	}
	return out
}
