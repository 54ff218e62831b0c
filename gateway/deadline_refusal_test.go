package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// A run whose deadline passes after its last call ends by that call's
// outcome (succeeded); a later call is refused deadline_exceeded, and the
// refusal shows: in belay_refusals_total, and as a model span with error
// deadline_exceeded in the run's trace (newcomer finding: the 504 was in
// neither the trace nor the metrics).
func TestDeadlineRefusalAfterIdleEndIsVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := memstore.New()
		stack, err := gateway.Build(t.Context(), config.Default(), gateway.Options{Store: ms, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer stack.Close(context.Background())
		h := stack.Server.Handler()
		call := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"ping"}]}`))
			req.Header.Set("X-Belay-Run-Id", "t-dl-1")
			req.Header.Set("X-Belay-Deadline", "1s")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		if rec := call(); rec.Code != 200 {
			t.Fatalf("first call: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(1500 * time.Millisecond) // past the deadline (the bubble's clock)
		synctest.Wait()
		rec := call()
		if rec.Code != http.StatusGatewayTimeout || rec.Header().Get("X-Belay-Failure-Reason") != "deadline_exceeded" {
			t.Fatalf("second call: %d %s %v; want 504 deadline_exceeded", rec.Code, rec.Body, rec.Header())
		}
		mrec := httptest.NewRecorder()
		h.ServeHTTP(mrec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(mrec.Body)
		if !strings.Contains(string(body), `belay_refusals_total{dialect="openai",reason="deadline_exceeded"} 1`) {
			t.Errorf("metrics lack the refusal:\n%s", grepLines(string(body), "belay_refusals_total"))
		}
		if err := stack.Flush(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		r, err := ms.GetRun(context.Background(), "t-dl-1")
		if err != nil || r.Status != store.RunSucceeded {
			t.Errorf("run: %+v, %v; want it succeeded (ended by its last call at its deadline)", r, err)
		}
		spans, err := ms.RunSpans(context.Background(), "t-dl-1")
		if err != nil {
			t.Fatal(err)
		}
		var refused, ok int
		for _, s := range spans {
			if s.Kind != trace.KindModel {
				continue
			}
			switch {
			case s.Status == trace.StatusError && s.Attrs[trace.AttrFailureReason] == "deadline_exceeded":
				refused++
			case s.Status == trace.StatusOK:
				ok++
			}
		}
		if refused != 1 || ok != 1 {
			t.Errorf("model spans: %d ok, %d refused for deadline_exceeded; want 1 and 1: %+v", ok, refused, spans)
		}
	})
}
