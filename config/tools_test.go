package config

import (
	"strings"
	"testing"
)

// tools.irreversible and tools.read_only take glob patterns; a bad one is
// refused at load, naming its field (it would match no tool, silently).
func TestToolPatterns(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	c, err := Parse([]byte("tools: {irreversible: [issue_refund], read_only: [\"get_*\", lookup_order]}\n"), "belay.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Tools.ReadOnly, ",") != "get_*,lookup_order" || strings.Join(c.Tools.Irreversible, ",") != "issue_refund" {
		t.Fatalf("tools = %+v", c.Tools)
	}
	for _, tc := range []struct{ y, want string }{
		{"tools: {read_only: [\"get_[\"]}\n", `tools.read_only[0]: "get_[" is not a glob pattern`},
		{"tools: {read_only: [\"\"]}\n", `tools.read_only[0]: "" is not a glob pattern`},
		{"tools: {irreversible: [ok, \"[\"]}\n", `tools.irreversible[1]: "[" is not a glob pattern`},
	} {
		if _, err := Parse([]byte(tc.y), "belay.yaml", env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.y, err, tc.want)
		}
	}
}

// The config takes the store URLs store/open opens, scheme in any case.
func TestStoreSchemesAsOpenReadsThem(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	for _, u := range []string{"memory://", "MEMORY://", "SQLITE://b.db", "sqlite3://b.db", "file://b.db", "PostgreSQL://h/db"} {
		if _, err := Parse([]byte("store: \""+u+"\"\n"), "belay.yaml", env); err != nil {
			t.Errorf("store %s: %v", u, err)
		}
	}
	for _, u := range []string{"memory://x", "mysql://h/db"} {
		if _, err := Parse([]byte("store: \""+u+"\"\n"), "belay.yaml", env); err == nil {
			t.Errorf("store %s loaded", u)
		}
	}
}
