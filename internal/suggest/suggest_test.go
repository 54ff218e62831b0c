package suggest

import "testing"

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
		{"x", []string{"y"}, "y"}, // one edit is within the minimum of 1
		{"", []string{"ab"}, ""},
	} {
		if got := Closest(c.s, c.names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.s, got, c.want)
		}
	}
}
