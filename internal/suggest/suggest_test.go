package suggest

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	if d := distance("modle", "model"); d != 1 {
		t.Errorf("distance(modle, model) = %d; want 1", d)
	}
	keys := []string{"listen", "store", "models", "timeouts"}
	headers := []string{"X-Belay-Run-Id", "X-Belay-Max-Turns", "X-Belay-Max-Tokens"}
	for _, c := range []struct {
		s     string
		names []string
		want  string
	}{
		{"listn", keys, "listen"},
		{"Store", keys, "store"},
		{"modles", keys, "models"}, // a swap is one edit
		{"timeout", keys, "timeouts"},
		{"upstream", keys, ""}, // far from all
		{"X-Belay-Runid", headers, "X-Belay-Run-Id"},
		{"X-Belay-Max-Turn", headers, "X-Belay-Max-Turns"},
		{"gpt-4o-mni", []string{"gpt-4o-mini", "claude-sonnet-5-5"}, "gpt-4o-mini"},
		{"GPT-4o-mini", []string{"gpt-4o-mini"}, "gpt-4o-mini"},
		{"x", []string{"y"}, ""},        // too short to be a slip of a name
		{"gtp", []string{"gpt"}, "gpt"}, // from 3 bytes, one edit is allowed
		{"", []string{"ab"}, ""},
	} {
		if got := Closest(c.s, c.names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.s, got, c.want)
		}
	}
}

// An input past MaxLen (a request's value can be megabytes) is not
// compared at all (review finding: a 512 KiB model name allocated 2.8 GB
// for 20 aliases); one at MaxLen still is.
func TestClosestLongInput(t *testing.T) {
	names := []string{"gpt-4o-mini", "claude-sonnet-5-5"}
	long := strings.Repeat("a", 1<<20)
	if allocs := testing.AllocsPerRun(3, func() { _ = Closest(long, names) }); allocs != 0 {
		t.Errorf("Closest of 1 MiB: %v allocations; want none", allocs)
	}
	at := strings.Repeat("x", MaxLen-1) + "y"
	if got := Closest(at, []string{strings.Repeat("x", MaxLen)}); got != strings.Repeat("x", MaxLen) {
		t.Errorf("Closest at MaxLen: %q", got)
	}
	if got := Closest(at+"z", []string{strings.Repeat("x", MaxLen)}); got != "" {
		t.Errorf("Closest past MaxLen: %q; want none", got)
	}
}
