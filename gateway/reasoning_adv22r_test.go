package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/budget"
)

// OpenAI-compatible servers in a deprecation window of the rename
// reasoning_content → reasoning send both members on every delta, with
// the same text (Rapid-MLX's vllm_mlx before its PR #852, mlx-vlm's
// server after its PR #1411, which keeps "reasoning" as an alias). A cut
// stream's estimate counts the reasoning once: 40,000 characters of
// reasoning, sent under both names, are about 10,000 output tokens
// ($1.00 at $100/M), not 20,000 ($2.00).
func TestAdv22r_CutStreamReasoningUnderBothNamesCountedOnce(t *testing.T) {
	url := gatewayOver(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"qwen3","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		chunk := strings.Repeat("think ", 1000/6) + "abcd" // 1,000 characters
		for range 40 {
			fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","model":"qwen3","choices":[{"index":0,"delta":{"reasoning_content":"%s","reasoning":"%s"}}]}`+"\n\n", chunk, chunk)
		}
		// cut: no usage chunk, no [DONE]
	}, adv22Config("openai", "qwen3", "pricing:\n  qwen3: {input: 1, output: 100}\n"))
	status, body, cost := postCost(t, url, "/v1/chat/completions",
		`{"model":"m","stream":true,"max_tokens":40000,"messages":[{"role":"user","content":"think hard"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if got := mustUSD(t, cost); got > budget.Dollars(1)*12/10 {
		t.Errorf("a stream cut after 40,000 characters of reasoning (sent as reasoning_content and as reasoning) was charged %s; want ≈ $1.00, the reasoning counted once", got)
	}
}
