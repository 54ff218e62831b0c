package budget

import (
	"testing"
	"time"
)

// A scope's kind is what RunScope and TenantScope put before the colon.
func TestScopeKind(t *testing.T) {
	for s, want := range map[Scope]string{
		RunScope("r1"): "run",
		TenantScope("acme", Day, time.Unix(0, 0)): "tenant",
		"turns:r1": "turns",
		"bare":     "",
	} {
		if got := s.Kind(); got != want {
			t.Errorf("%q.Kind() = %q, want %q", s, got, want)
		}
	}
}
