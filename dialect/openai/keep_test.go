package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
)

// With Keep, the accumulator rebuilds the answer from the chunks: two
// choices, text and a tool call split over chunks, finish reasons; past
// dialect.KeepMax the text is cut and says how many bytes were left out.
// Without Keep it keeps nothing.
func TestAccumulatorKeepsTheAnswer(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}},{"index":1,"delta":{"role":"assistant","content":"B"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"lo"}}]}`,
		`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
		`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`[DONE]`,
	}
	var keep, none openai.Accumulator
	keep.Keep = true
	for _, c := range chunks {
		if err := keep.Add([]byte(c)); err != nil {
			t.Fatal(err)
		}
		_ = none.Add([]byte(c))
	}
	want := `[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null,"annotations":[]},"finish_reason":"stop"},` +
		`{"index":1,"message":{"role":"assistant","content":"B","refusal":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}],"annotations":[]},"finish_reason":null}]`
	if got := string(keep.Answer()); got != want {
		t.Errorf("answer\n%s\nwant\n%s", got, want)
	}
	if none.Answer() != nil {
		t.Errorf("without Keep: %s", none.Answer())
	}

	var big openai.Accumulator
	big.Keep = true
	part := strings.Repeat("x", 300<<10)
	for range 4 { // 1,200 KiB in all
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": part}}}})
		if err := big.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	var got []struct {
		Message struct{ Content string } `json:"message"`
	}
	if err := json.Unmarshal(big.Answer(), &got); err != nil {
		t.Fatal(err)
	}
	note := dialect.DroppedNote(4*300<<10 - dialect.KeepMax)
	if c := got[0].Message.Content; len(c) != dialect.KeepMax+len(note) || !strings.HasSuffix(c, note) {
		t.Errorf("kept %d bytes ending %q; want %d and the note %q", len(c), c[max(len(c)-120, 0):], dialect.KeepMax+len(note), note)
	}
}
