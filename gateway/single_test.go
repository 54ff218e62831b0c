package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/belay-run/belay/store"
)

// A call without X-Belay-Run-Id is a run of its own: once the call is
// answered, the store holds it ended by its outcome (not "running" for an
// idle time), and a call that sends its id back is refused in the
// caller's dialect (the run is over) without reaching the upstream.
func TestGatewayNamedRunIsTheCall(t *testing.T) {
	var calls atomic.Int64
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		calls.Add(1)
		if strings.Contains(string(b), "please fail") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"bad","type":"invalid_request_error"}}`)
			return
		}
		fmt.Fprintf(w, okCompletion, 10, 5)
	})
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL)), nil)
	resp, body := g.do("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("X-Belay-Run-Id")
	flushRuns(t, g.stack)
	ctx := context.Background()
	rec, err := g.store.GetRun(ctx, id)
	if err != nil || rec.Status != store.RunSucceeded || rec.Turns != 1 || rec.Cost == 0 || rec.Ended.IsZero() {
		t.Fatalf("gateway-named run after its call: %+v, %v; want succeeded, 1 turn, its cost, ended", rec, err)
	}
	before := calls.Load()
	resp, body = g.do("POST", "/v1/chat/completions", chat, "X-Belay-Run-Id", id)
	if resp.StatusCode < 400 || resp.StatusCode >= 500 || resp.Header.Get("X-Should-Retry") != "false" ||
		!strings.Contains(body, `"error"`) || !strings.Contains(body, id) {
		t.Fatalf("a call on the ended run: status %d, x-should-retry %q, body %s; want a 4xx OpenAI error naming the run",
			resp.StatusCode, resp.Header.Get("X-Should-Retry"), body)
	}
	t.Logf("a call on the ended run: %d %s", resp.StatusCode, body)
	if calls.Load() != before {
		t.Errorf("the refused call reached the upstream")
	}

	resp, _ = g.do("POST", "/v1/chat/completions", strings.Replace(chat, "hello", "please fail", 1))
	if resp.StatusCode != 400 {
		t.Fatalf("status %d; want the upstream's 400", resp.StatusCode)
	}
	flushRuns(t, g.stack)
	if rec, _ := g.store.GetRun(ctx, resp.Header.Get("X-Belay-Run-Id")); rec.Status != store.RunFailed || rec.Error == "" {
		t.Fatalf("gateway-named run of a failed call: %+v; want failed with its error", rec)
	}
}
