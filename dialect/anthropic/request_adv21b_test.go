package anthropic_test

import (
	"fmt"
	"testing"

	"github.com/belay-run/belay/dialect/anthropic"
)

// WebSearches sums the max_uses of every web search tool, saturated: two
// tools of 2^62 uses each do not wrap the sum negative (an adversarial
// review's finding: the gateway then reserved no search at all).
func TestAdv21bWebSearchesOverflow(t *testing.T) {
	const big = int64(1) << 62
	body := fmt.Sprintf(`{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[`+
		`{"type":"web_search_20250305","name":"web_search","max_uses":%d},{"type":"web_search_20260209","name":"web_search","max_uses":%d}]}`, big, big)
	r, err := anthropic.ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if n := anthropic.WebSearches(r); n < big {
		t.Errorf("WebSearches = %d, want at least %d (saturated, not wrapped)", n, big)
	}
}
