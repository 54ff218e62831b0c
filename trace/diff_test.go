package trace

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A step made under another parent is a changed step, though the steps
// and their order are the same (adversarial review: a tool call made
// inside an attempt and one made by the run compared equal).
func TestDiffSeesTheTree(t *testing.T) {
	t0 := time.Unix(1000, 0)
	mk := func(toolUnderAttempt bool) []byte {
		run := RunSpan("t", "r", "agent", t0)
		chat := ModelSpan(run, "m", t0.Add(time.Second))
		att := AttemptSpan(chat, "sim-0", 1, t0.Add(2*time.Second))
		parent := run
		if toolUnderAttempt {
			parent = att
		}
		c, err := Canonical([]Span{run, chat, att, ToolSpan(parent, "issue_refund", t0.Add(3*time.Second))})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d, err := DiffCanonical(mk(false), mk(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Entries) != 1 || d.Entries[0].Op != Changed || len(d.Entries[0].Changes) == 0 || d.Entries[0].Changes[0].Field != "parent" {
		t.Fatalf("diff = %+v; want the tool step changed in its parent", d.Entries)
	}
	ch := d.Entries[0].Changes[0]
	if ch.Old != "run invoke_agent agent" || !strings.HasPrefix(fmt.Sprint(ch.New), "run invoke_agent agent > model chat m > attempt ") {
		t.Errorf("parent change %v → %v", ch.Old, ch.New)
	}
	if same, err := DiffCanonical(mk(true), mk(true)); err != nil || !same.Equal() {
		t.Errorf("the same tree: %+v, %v", same.Entries, err)
	}
}
