package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/belay-run/belay/failure"
)

// A denied approval reaches the model as its reason, without the
// approval's id (random: it made a seeded suite's conversations differ);
// other errors keep their text.
func TestModelError(t *testing.T) {
	denied := fmt.Errorf("tool: %w", &failure.Error{Kind: failure.Fatal, Reason: failure.ApprovalDenied,
		Message: "tool issue_refund: approval apr_01a23010-659d-76ad-b4e4-385dd9846ddb denied by rule:default"})
	got := modelError(denied)
	if !strings.HasPrefix(got, "approval_denied") || strings.Contains(got, "apr_") {
		t.Errorf("denied approval: %q; want its reason, no approval id", got)
	}
	other := errors.New("order Z-9999 not found")
	if got := modelError(other); got != other.Error() {
		t.Errorf("other error: %q; want its text", got)
	}
}

// ParseCheck reads the suite's check texts before any run: the ones the
// example suite uses, and it refuses a misspelt condition or count.
func TestParseCheck(t *testing.T) {
	e := &EvalAgent{}
	for _, ok := range []string{"refunds=0 emails=1", "refunds:A-1001=1 emails=1", ""} {
		if err := e.ParseCheck(ok); err != nil {
			t.Errorf("ParseCheck(%q): %v", ok, err)
		}
	}
	for check, want := range map[string]string{
		"refund=1":   `check "refund=1": unknown condition (want refunds, refunds:ORDER or emails)`,
		"refunds:=1": `check "refunds:=1": unknown condition (want refunds, refunds:ORDER or emails)`,
		"emails=one": `check "emails=one": want NAME=COUNT`,
		"refunds 1":  `check "refunds": want NAME=COUNT`,
	} {
		if err := e.ParseCheck(check); err == nil || err.Error() != want {
			t.Errorf("ParseCheck(%q): %v; want %s", check, err, want)
		}
	}
}
