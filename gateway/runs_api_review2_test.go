package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/trace"
)

// Review: a call ended by POST /v1/belay/runs/{id}/end in flight: the
// client's message, and the model span's recorded failure, say "while this
// call was in flight" once. Streamed before any output (not committed),
// streamed after output, and not streamed.
func TestReviewEndedInFlightMessageOnce(t *testing.T) {
	arrived := make(chan struct{}, 1)
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			if strings.Contains(string(b), "output-first") {
				fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"partial"},"finish_reason":null}]}`+"\n\n")
			} else {
				fmt.Fprint(w, ": keep-alive\n\n")
			}
			w.(http.Flusher).Flush()
		}
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	y := aliasRetrying(1, "", openAIDep("d", "gpt-4o", up.URL))
	g := newGW(t, y, nil)
	for _, c := range []struct{ name, body string }{
		{"plain", `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`},
		{"stream-before-output", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"stream-after-output", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"output-first"}]}`},
	} {
		id := "ended-" + c.name
		type result struct {
			code int
			out  string
		}
		done := make(chan result, 1)
		go func() {
			req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions", strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Belay-Run-Id", id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- result{0, err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- result{resp.StatusCode, string(b)}
		}()
		<-arrived
		if resp, out := g.do("POST", "/v1/belay/runs/"+id+"/end", ""); resp.StatusCode != 200 {
			t.Fatalf("%s: end %d %s", c.name, resp.StatusCode, out)
		}
		res := <-done
		n := strings.Count(res.out, "while this call was in flight")
		t.Logf("%s: %d %s", c.name, res.code, res.out)
		if n != 1 {
			t.Errorf("%s: client's answer says \"while this call was in flight\" %d times", c.name, n)
		}
		rec := g.run(id)
		t.Logf("%s: stored status %s cost %s estimated %v tokens %d/%d", c.name, rec.Status, rec.Cost, rec.CostEstimated, rec.InputTokens, rec.OutputTokens)
		if rec.Cost == 0 || !rec.CostEstimated {
			t.Errorf("%s: the canceled attempt: cost %s, estimated %v; want charged, marked estimated", c.name, rec.Cost, rec.CostEstimated)
		}
		for _, sp := range storedSpans(t, g.stack, id) {
			if sp.Kind != trace.KindModel {
				continue
			}
			msg, _ := sp.Attrs[trace.AttrFailureMessage].(string)
			t.Logf("%s: model span reason %v message %q", c.name, sp.Attrs[trace.AttrFailureReason], msg)
			if k := strings.Count(msg, "while this call was in flight"); k > 1 {
				t.Errorf("%s: model span's failure message repeats the suffix %d times", c.name, k)
			}
		}
	}
}
