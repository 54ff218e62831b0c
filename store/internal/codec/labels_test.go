package codec

import (
	"maps"
	"testing"
)

// Labels round-trips through ParseLabels, keys in sorted order, with
// quotes, backslashes, control characters, non-ASCII text and invalid
// UTF-8 (which json.Marshal turns into U+FFFD).
func TestLabelsRoundTrip(t *testing.T) {
	for _, l := range []map[string]string{
		{"source": "gateway"},
		{"b": "2", "a": "1", "c": `q"uo\te`},
		{"ctl": "line\nbreak\ttab\x01", "uni": "héllo ✓", "html": "<a>&"},
	} {
		text := Labels(l)
		got, err := ParseLabels(text)
		if err != nil || !maps.Equal(got, l) {
			t.Errorf("Labels(%v) = %s, parsed back %v, %v", l, *text, got, err)
		}
	}
	if got := *Labels(map[string]string{"b": "2", "a": "1"}); got != `{"a":"1","b":"2"}` {
		t.Errorf("Labels = %s; want keys sorted", got)
	}
	bad := map[string]string{"k": "a\xffb"}
	got, err := ParseLabels(Labels(bad))
	if err != nil || got["k"] != "a\ufffdb" {
		t.Errorf("invalid UTF-8 label parsed back as %q, %v; want U+FFFD in place", got["k"], err)
	}
	if Labels(nil) != nil {
		t.Error("Labels(nil) is not nil")
	}
}
