package sim

import "testing"

// Every named profile says what it does (belay sim --help lists them).
func TestEveryProfileHasADoc(t *testing.T) {
	for _, n := range ProfileNames() {
		if ProfileDoc(n) == "" {
			t.Errorf("profile %s has no doc", n)
		}
	}
	if ProfileDoc("nope") != "" {
		t.Error("a doc for a profile that does not exist")
	}
}
