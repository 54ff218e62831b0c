package eval

import "testing"

func TestRunKey(t *testing.T) {
	for id, want := range map[string]string{
		"ev1a2b3c-happy-path-7": "happy-path-7",
		"evff-x-0":              "x-0",
		"run-42":                "run-42", // not an eval id
		"plain":                 "plain",
	} {
		if got := RunKey(id); got != want {
			t.Errorf("RunKey(%q) = %q, want %q", id, got, want)
		}
	}
}
