package openai_test

import (
	"encoding/json"
	"testing"

	"github.com/belay-run/belay/dialect/openai"
)

// A string content's text is what json.Unmarshal decodes, whether or not
// it takes the copy-through path; content that is not a valid string is "".
func TestTextOfStringContentMatchesUnmarshal(t *testing.T) {
	for _, c := range []string{
		`"Say hello."`, `""`, ` "padded" `, `"é ✓"`, `"a\"b"`, `"tab\there"`, `"\u00e9"`, "\"\xff\"",
		"\"ctl\x01\"", `"a"b"`, `"`, `"open`, `"a" x`, `"\q"`,
	} {
		var want string
		_ = json.Unmarshal([]byte(c), &want)
		if got := (openai.Message{Content: json.RawMessage(c)}).Text(); got != want {
			t.Errorf("Text of %q = %q, want %q", c, got, want)
		}
	}
}
