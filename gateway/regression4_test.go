package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
)

// Review finding (session 3): the gateway shuts down (Stack.Close: EndFresh) while a call it
// named itself is streaming. The stream then finishes and is charged: the
// ledger has its cost, the stored run record does not.
func TestReview3ShutdownDuringSingleStreamLosesRecordCost(t *testing.T) {
	release := make(chan struct{})
	up := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		sseHeader(w)
		io.WriteString(w, roleChunk+chunk("first"))
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, chunk(" second")+stopChunk)
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	st := memstore.New()
	g := newGW(t, oneAlias("", openAIDep("d", "gpt-4o-mini", up.URL)), st)
	req, _ := http.NewRequest("POST", g.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Belay-Run-Id")
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "first") {
			break
		}
	}
	// Shutdown: the HTTP server's grace period is over, the stack closes.
	if err := g.stack.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(release)
	if _, err := io.ReadAll(br); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec, err := st.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	led, _ := st.Balance(ctx, budget.RunScope(id))
	t.Logf("record: %s %q turns %d tokens %d/%d cost %s; ledger settled %s", rec.Status, rec.StopReason,
		rec.Turns, rec.InputTokens, rec.OutputTokens, rec.Cost, led.Settled)
	if rec.Status == store.RunRunning || rec.Cost != led.Settled || rec.OutputTokens == 0 {
		t.Errorf("stored record cost %s, output tokens %d; ledger settled %s", rec.Cost, rec.OutputTokens, led.Settled)
	}
}
