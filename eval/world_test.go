package eval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadText(t *testing.T, text string) (*Suite, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return LoadSuite(p)
}

// A world is written to the agent as JSON; a mapping keyed by numbers
// (YAML decodes it as map[any]any, which encoding/json refuses) gets its
// keys as they read in the suite. Found by an adversarial review: the
// world file was silently not written at all.
func TestWorldWithNumberKeys(t *testing.T) {
	s, err := loadText(t, "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nscenarios:\n  - name: a\n    world:\n"+
		"      orders:\n        1001: {status: shipped, lines: [{7: x}]}\n        true: yes\n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s.Scenarios[0].World)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"orders":{"1001":{"lines":[{"7":"x"}],"status":"shipped"},"true":"yes"}}`; string(b) != want {
		t.Errorf("world JSON = %s, want %s", b, want)
	}
}

// What JSON cannot hold is refused when the suite loads, naming where.
func TestWorldJSONCannotHold(t *testing.T) {
	for _, c := range []struct{ world, want string }{
		{"{balance: .nan}", "scenarios.0.world: cannot be written as JSON for the agent: balance: NaN, a number JSON cannot hold"},
		{"{a: {b: [1, -.inf]}}", "a.b[1]: -Inf, a number JSON cannot hold"},
	} {
		_, err := loadText(t, "version: 1\nagent: {command: [sh, -c, 'echo hi']}\nscenarios:\n  - name: a\n    world: "+c.world+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("world %s: %v; want an error with %q", c.world, err, c.want)
		}
	}
}
