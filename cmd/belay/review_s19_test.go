package main

// Session 19 review: belay unkill refusing a flag that is not set.

import (
	"strings"
	"testing"
)

// Sound: a set flag is cleared whatever its name (spaces, commas,
// non-ASCII, a leading dash after --), exactly and only it; "unkill all"
// clears only the flag "kill all" set and, when only other flags are set,
// is refused naming them; --ignore-absent is exit 0.
func TestS19_UnkillClearsSetFlags(t *testing.T) {
	url := seed(t)
	names := []string{"a b", "x,y", "café", "-dash", "run~1", " lead", "trail "}
	for _, n := range names {
		_, _, err := belayArgs(t, "kill", "--store", url, "tool", "--", n)
		wantCode(t, err, 0, "")
	}
	_, _, err := belay(t, url, "kill", "tenant", "acme", "--force")
	wantCode(t, err, 0, "")

	_, _, err = belay(t, url, "unkill", "all")
	wantCode(t, err, 2, "no kill all is set; the flags set: ")
	out, _, err := belay(t, url, "unkill", "all", "--ignore-absent")
	wantCode(t, err, 0, "")
	wantLines(t, out, "no kill all was set")

	for i, n := range names {
		out, _, err := belayArgs(t, "unkill", "--store", url, "tool", "--", n)
		wantCode(t, err, 0, "")
		wantLines(t, out, "cleared kill tool "+n)
		if got := len(listKillsIn(t, url)); got != len(names)-i {
			t.Fatalf("after unkill tool %q: %d flags, want %d", n, got, len(names)-i)
		}
	}
	_, _, err = belay(t, url, "kill", "all")
	wantCode(t, err, 0, "")
	_, _, err = belay(t, url, "unkill", "all")
	wantCode(t, err, 0, "")
	if ks := listKillsIn(t, url); len(ks) != 1 || ks[0].Name != "acme" {
		t.Errorf("unkill all cleared more than the all flag: %+v", ks)
	}
}

// Found by the review, fixed: the refusal names the flags set unquoted, so the difference it
// exists to show is invisible when it is in blanks (a flag "refund " set
// from a script, "refund" typed), names holding ", " read as several
// flags, and a name's control characters (a flag set by a Go agent or
// the admin API, which take any name) go to the terminal as they are.
func TestS19_UnkillRefusalQuotesNames(t *testing.T) {
	url := seed(t)
	for _, n := range []string{"refund ", "x, tool y", "evil\x1b[2J\rtool ok"} {
		_, _, err := belayArgs(t, "kill", "--store", url, "tool", "--", n)
		wantCode(t, err, 0, "")
	}
	_, _, err := belay(t, url, "unkill", "tool", "refund")
	wantCode(t, err, 2, `no kill tool "refund" is set`)
	msg := err.Error()
	t.Logf("%q", msg)
	if !strings.Contains(msg, `"refund "`) {
		t.Errorf("the set flag \"refund \" is not told apart from the name asked, \"refund\": %q", msg)
	}
	if strings.Contains(msg, "tool x, tool y") {
		t.Errorf("one flag \"x, tool y\" reads as two: %q", msg)
	}
	if strings.ContainsAny(msg, "\x1b\r") {
		t.Errorf("control characters of a flag's name reach the terminal: %q", msg)
	}
}
