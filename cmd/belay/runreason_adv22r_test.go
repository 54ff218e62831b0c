package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/belay-run/belay/store"
)

// A failed run's error is the client's text when its agent ended it
// (POST /v1/belay/runs/{id}/end {"status":"failed","error":...}), or its
// agent's. runReason shows a "<kind>: <reason>" head's reason only when
// it is one belay defines (git's "fatal: not a git repository" read "not"),
// and otherwise the first clause, within 40 runes and without control or
// bidirectional-formatting characters: a newline, a tab or an escape
// sequence once reached the table cell, and broke the row.
func TestAdv22r_RunReasonOnlyNamesFailureReasons(t *testing.T) {
	for _, c := range []struct{ err, bad string }{
		{"fatal: not a git repository (or any of the parent directories): .git", "not"},
		{"transient: please retry later", "please"},
	} {
		if got := runReason(store.Run{Status: store.RunFailed, Error: c.err}); got == c.bad {
			t.Errorf("runReason(%q) = %q: a word of free text shown as a failure reason; want the error's first clause", c.err, got)
		}
	}
	for _, e := range []string{
		"fatal: boom\nTraceback (most recent call last):",
		"fatal: boom\tsecond column",
		"fatal: " + strings.Repeat("x", 200),
		"fatal: ok\x1b[2J\x1b[31mERASED",
		"agent failed \x1b]0;owned\x07 here",
		"agent failed \u202eevil",
	} {
		got := runReason(store.Run{Status: store.RunFailed, Error: e})
		if n := utf8.RuneCountInString(got); n > runReasonMax {
			t.Errorf("runReason(%q) = %q: %d runes; want at most %d", e, got, n, runReasonMax)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
				t.Errorf("runReason(%q) = %q: has control character %U (a table cell of belay runs)", e, got, r)
				break
			}
		}
	}
	// The table keeps one line per run.
	var b bytes.Buffer
	now := time.Now()
	_ = writeRuns(&b, []store.Run{{ID: "r1", Status: store.RunFailed, Error: "fatal: boom\nTraceback", Started: now, Ended: now}}, now)
	if n := strings.Count(b.String(), "\n"); n != 2 {
		t.Errorf("belay runs printed %d lines for one run:\n%s", n, b.String())
	}
}
