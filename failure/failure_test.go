package failure

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestKindAndReason(t *testing.T) {
	for _, name := range []string{"ok", "transient", "degraded", "permanent", "fatal"} {
		k, err := ParseKind(name)
		if err != nil || k.String() != name {
			t.Errorf("ParseKind(%q) = %v, %v", name, k, err)
		}
	}
	if _, err := ParseKind("retry"); err == nil {
		t.Error("ParseKind accepted an unknown name")
	}
	if Kind(9).String() != "kind(9)" {
		t.Errorf("Kind(9) = %s", Kind(9))
	}
	if Reason("made_up").Kind() != Permanent || ModelNotFound.Kind() != Degraded || Killed.Kind() != Fatal {
		t.Error("reason kinds wrong")
	}
}

func TestErrorMatchingAndText(t *testing.T) {
	e := &Error{Kind: Transient, Reason: Overloaded, Status: 529, Deployment: "anthropic/claude", Message: "Overloaded"}
	if got := e.Error(); got != "transient: overloaded (HTTP 529) from anthropic/claude: Overloaded" {
		t.Errorf("Error() = %q", got)
	}
	wrapped := fmt.Errorf("attempt 2: %w", e)
	if !errors.Is(wrapped, Transient) || !errors.Is(wrapped, Overloaded) || errors.Is(wrapped, RateLimited) || errors.Is(wrapped, Degraded) {
		t.Error("errors.Is against kind/reason is wrong")
	}
	if As(wrapped) != e || As(errors.New("x")) != nil {
		t.Error("As is wrong")
	}
}

func TestPlainMessageIsShortAndValid(t *testing.T) {
	msg := plainMessage([]byte(strings.Repeat("é  ", 500)), false)
	if len(msg) > maxMessage+len("…") || !strings.HasSuffix(msg, "…") || strings.Contains(msg, "  ") {
		t.Errorf("message %q (%d bytes)", msg, len(msg))
	}
}

// ParseText reads back what Error wrote, whatever parts it has.
func TestParseTextReadsError(t *testing.T) {
	for _, e := range []*Error{
		{Kind: Transient, Reason: RateLimited, Status: 429, Deployment: "d", Message: "slow: down"},
		{Kind: Fatal, Reason: Killed, Message: "killed by the kill switch (run r1): runaway"},
		{Kind: Degraded, Reason: CircuitOpen},
	} {
		k, r, rest, ok := ParseText(e.Error())
		if !ok || k != e.Kind || r != e.Reason || e.Kind.String()+": "+string(r)+rest != e.Error() {
			t.Errorf("ParseText(%q) = %v %q %q %v", e.Error(), k, r, rest, ok)
		}
	}
	for _, s := range []string{"agent exited 3", "abandoned: no process held the run", ""} {
		if _, _, _, ok := ParseText(s); ok {
			t.Errorf("ParseText(%q) read it as a failure", s)
		}
	}
}
