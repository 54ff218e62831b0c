package trace

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestMatchTrajectory(t *testing.T) {
	tests := []struct {
		expected, actual []string
		mode             MatchMode
		ok               bool
		why              string
	}{
		{[]string{"lookup", "refund"}, []string{"lookup", "refund"}, MatchStrict, true, ""},
		{[]string{"lookup", "refund"}, []string{"refund", "lookup"}, MatchStrict, false, "call 1: expected lookup, got refund"},
		{[]string{"lookup"}, []string{"lookup", "email"}, MatchStrict, false, "call 2: expected (nothing), got email"},
		{[]string{"lookup", "refund"}, []string{"refund", "lookup"}, MatchUnordered, true, ""},
		{[]string{"lookup", "lookup"}, []string{"lookup"}, MatchUnordered, false, "missing lookup"},
		{[]string{"lookup"}, []string{"lookup", "email", "email"}, MatchUnordered, false, "unexpected email x2"},
		{[]string{"lookup", "refund"}, []string{"email", "refund", "lookup"}, MatchSubset, true, ""},
		{[]string{"lookup", "refund"}, []string{"lookup", "email"}, MatchSubset, false, "missing refund"},
		{[]string{"refund", "refund"}, []string{"refund"}, MatchSubset, false, "missing refund"},
		{[]string{"lookup", "refund", "email"}, []string{"refund"}, MatchSuperset, true, ""},
		{[]string{"lookup"}, []string{"lookup", "delete_user"}, MatchSuperset, false, "unexpected delete_user"},
		{nil, nil, MatchStrict, true, ""},
		{nil, []string{"x"}, MatchSubset, true, ""},
		{[]string{"a"}, []string{"a"}, "sometimes", false, `unknown trajectory match "sometimes"`},
	}
	for _, tt := range tests {
		ok, why := MatchTrajectory(tt.expected, tt.actual, tt.mode)
		if ok != tt.ok || why != tt.why {
			t.Errorf("MatchTrajectory(%v, %v, %s) = %v, %q; want %v, %q", tt.expected, tt.actual, tt.mode, ok, why, tt.ok, tt.why)
		}
	}
}

func TestParseMatchMode(t *testing.T) {
	if m, err := ParseMatchMode(""); m != MatchStrict || err != nil {
		t.Errorf(`ParseMatchMode("") = %q, %v`, m, err)
	}
	if m, err := ParseMatchMode("superset"); m != MatchSuperset || err != nil {
		t.Errorf("ParseMatchMode(superset) = %q, %v", m, err)
	}
	if _, err := ParseMatchMode("loose"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ParseMatchMode(loose) err = %v", err)
	}
}

func TestToolCalls(t *testing.T) {
	spans := refundRun(time.Unix(0, 0), 10, "lookup_order", "send_email")
	slices.Reverse(spans) // storage order must not matter
	spans = append(spans, Span{SpanID: "bare", Kind: KindTool, Name: "execute_tool notify", Start: time.Unix(9, 0),
		Attrs: map[string]any{"odd": make(chan int)}})
	got := ToolCalls(spans)
	want := []string{"issue_refund", "lookup_order", "send_email", "notify"}
	if !slices.Equal(got, want) {
		t.Errorf("ToolCalls = %v, want %v", got, want)
	}
}
