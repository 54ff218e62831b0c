package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// A request for n choices reserves n times its output limit: each choice
// is generated and billed. Under a 250-token run limit, one choice of up
// to 100 tokens fits and three do not; n outside 1..128 is the client's
// error, in OpenAI's shape.
func TestChoicesAreReserved(t *testing.T) {
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, tokenLimitConfig(up.URL, "{max_turns: 50, deadline: 1m, max_cost_usd: 5, max_tokens: 250}"), nil)
	call := func(n string) (int, string) {
		body := `{"model":"m","max_tokens":100,` + n + `"messages":[{"role":"user","content":"hello"}]}`
		resp, b := g.do("POST", "/v1/chat/completions", body)
		return resp.StatusCode, b
	}
	if code, b := call(`"n":1,`); code != 200 {
		t.Fatalf("n=1: %d %s", code, b)
	}
	if code, b := call(`"n":3,`); code != 402 || !strings.Contains(b, "token limit") {
		t.Errorf("n=3: %d %s; want 402 budget_exceeded on the token limit", code, b)
	}
	if code, b := call(`"n":0,`); code != 400 || !strings.Contains(b, `"message":"n: must be between 1 and 128; got 0","type":"invalid_request_error"`) {
		t.Errorf("n=0: %d %s; want 400 invalid_request_error naming n", code, b)
	}
}
