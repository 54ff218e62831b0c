package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect"
)

// The kept answer of a Responses stream holds at most dialect.KeepMax
// bytes in all, as the chat accumulator's does (an adversarial review: the
// items done were each checked against it, not their total, and four of
// 900 KB were kept whole).
func TestResponsesKeepMaxHoldsForDoneItems(t *testing.T) {
	a := ResponsesAccumulator{Keep: true}
	args := strings.Repeat("x", 900<<10)
	for i := range 4 {
		item, _ := json.Marshal(map[string]any{"type": "function_call", "id": fmt.Sprint("fc_", i), "call_id": "c", "name": "f", "arguments": args})
		ev, _ := json.Marshal(map[string]any{"type": "response.output_item.done", "sequence_number": i, "output_index": i, "item": json.RawMessage(item)})
		a.Add(ev)
	}
	if n := len(a.Answer()); n > dialect.KeepMax+4096 {
		t.Errorf("kept answer is %d bytes; KeepMax is %d", n, dialect.KeepMax)
	}
}
