package sim_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/belay-run/belay/sim"
)

// A scripted scenario on one simulator: a healthy deployment at /d/primary
// and a dead one at /d/down.
func Example() {
	script, err := sim.ParseScript([]byte(`
captures: ['order (?P<order_id>[A-Z]-\d+)']
rules:
  - when: {scenario: refund, no_tool_result: lookup_order}
    reply:
      tool_calls: [{name: lookup_order, arguments: {order_id: "{{order_id}}"}}]
`))
	if err != nil {
		panic(err)
	}
	s := sim.New(sim.Config{Seed: 1, Script: script})
	ts := httptest.NewServer(s)
	defer ts.Close()

	body := `{"model":"claude-sonnet-5-5","max_tokens":100,"system":"scenario: refund",
	  "messages":[{"role":"user","content":"Refund order A-1001"}]}`
	for _, dep := range []string{"/d/primary", "/d/down"} {
		req, _ := http.NewRequestWithContext(context.Background(), "POST", ts.URL+dep+"/v1/messages", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(dep, resp.StatusCode, strings.Contains(string(b), `"input":{"order_id":"A-1001"}`))
	}
	fmt.Println(s.Stats().Faults["unavailable"])
	// Output:
	// /d/primary 200 true
	// /d/down 503 false
	// 1
}
