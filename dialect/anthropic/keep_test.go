package anthropic_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
)

// With Keep, the accumulator rebuilds the content blocks: thinking, text,
// a tool_use whose input came in parts; a tool_use cut inside its input is
// kept as the string it was.
func TestAccumulatorKeepsTheAnswer(t *testing.T) {
	events := []string{
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"model":"c","usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi "}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"there"}}`,
		`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}`,
		`{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"t2","name":"g","input":{}}}`,
		`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"b\":"}}`,
	}
	var a anthropic.Accumulator
	a.Keep = true
	for _, e := range events {
		if err := a.Add([]byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	want := `[{"thinking":"hmm","type":"thinking"},{"text":"Hi there","type":"text"},` +
		`{"id":"t1","input":{"a":1},"name":"f","type":"tool_use"},{"id":"t2","input":"{\"b\":","name":"g","type":"tool_use"}]`
	if got := string(a.Answer()); got != want {
		t.Errorf("answer\n%s\nwant\n%s", got, want)
	}
}

// Past dialect.KeepMax the text is cut, and a last text block says how
// many bytes were left out.
func TestAccumulatorKeepsAtMostKeepMax(t *testing.T) {
	var a anthropic.Accumulator
	a.Keep = true
	delta, _ := json.Marshal(map[string]any{"type": "content_block_delta", "index": 0,
		"delta": map[string]any{"type": "text_delta", "text": strings.Repeat("x", dialect.KeepMax+10)}})
	for _, e := range [][]byte{[]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), delta} {
		if err := a.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	var got []struct{ Type, Text string }
	if err := json.Unmarshal(a.Answer(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0].Text) != dialect.KeepMax || got[1].Text != dialect.DroppedNote(10) {
		t.Errorf("%d blocks, first %d bytes, last %q; want 2, %d bytes, %q", len(got), len(got[0].Text), got[len(got)-1].Text, dialect.KeepMax, dialect.DroppedNote(10))
	}
}
