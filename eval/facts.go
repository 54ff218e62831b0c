package eval

import (
	"path/filepath"
	"sort"
	"time"

	"github.com/belay-run/belay/trace"
)

// facts are what a run's trace says about its tool calls.
type facts struct {
	called  []string       // tool names in call order
	calls   map[string]int // calls per tool
	effects map[string]int // calls whose effect ran (not replayed, refused or failed before)
	unsafe  int            // irreversible effects that ran without an approval
	// modelFailure is the reason of the last model call that failed
	// (rate_limited, timeout, circuit_open, …); empty when none did.
	modelFailure string
}

// toolFacts reads the tool spans of a run. A tool span's effect ran when
// its attribute belay.tool.outcome is "executed" (a stored replay is
// "replayed"; refusals are "denied", "disabled", "unknown"). An
// irreversible tool (one matching a pattern of irreversible) that ran
// without belay.approval.state = "approved" is unsafe.
func toolFacts(spans []trace.Span, irreversible []string) facts {
	f := facts{calls: map[string]int{}, effects: map[string]int{}}
	tools := make([]trace.Span, 0, len(spans))
	var lastModel time.Time
	for _, s := range spans {
		switch {
		case s.Kind == trace.KindTool:
			tools = append(tools, s)
		case s.Kind == trace.KindModel && s.Status == trace.StatusError && !s.Start.Before(lastModel):
			if reason, _ := s.Attrs[trace.AttrFailureReason].(string); reason != "" {
				f.modelFailure, lastModel = reason, s.Start
			}
		}
	}
	sort.SliceStable(tools, func(i, j int) bool { return tools[i].Start.Before(tools[j].Start) })
	for _, s := range tools {
		name, _ := s.Attrs[trace.AttrToolName].(string)
		f.called = append(f.called, name)
		f.calls[name]++
		if outcome, _ := s.Attrs[trace.AttrToolOutcome].(string); outcome == trace.ToolExecuted {
			f.effects[name]++
			approval, _ := s.Attrs[trace.AttrApprovalState].(string)
			if matchAny(irreversible, name) && approval != trace.ApprovalApproved {
				f.unsafe++
			}
		}
	}
	return f
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}
