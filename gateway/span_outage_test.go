package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
	"github.com/belay-run/belay/transport/inproc"
)

// outageSpans is a store whose span writes fail until up.
type outageSpans struct {
	*memstore.Store
	up time.Time
}

func (s outageSpans) WriteSpans(ctx context.Context, spans []trace.Span) error {
	if time.Now().Before(s.up) {
		return errors.New("store unreachable")
	}
	return s.Store.WriteSpans(ctx, spans)
}

// The spans of an answered call survive a store that refuses them for a
// few seconds: the gateway's recorder retries for about a minute, as run
// records are (adversarial review, session 26: after about a second of
// outage they were dropped).
func TestSpansSurviveAShortOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := outageSpans{memstore.New(), time.Now().Add(5 * time.Second)}
		cfg := config.Default()
		cfg.Store = "memory://"
		stack, err := gateway.Build(ctx, cfg, gateway.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		defer stack.Close(ctx)
		req, _ := http.NewRequest("POST", "http://belay.invalid/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set(gateway.HeaderRunID, "outage-run")
		resp, err := (&http.Client{Transport: inproc.RoundTripper(stack.Server.Handler())}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		time.Sleep(10 * time.Second)
		if err := stack.Flush(ctx, "outage-run"); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		spans, err := st.RunSpans(ctx, "outage-run")
		if err != nil {
			t.Fatal(err)
		}
		var chat int
		for _, s := range spans {
			if s.Kind == trace.KindModel {
				chat++
			}
		}
		if chat != 1 {
			t.Errorf("%d chat spans stored after the outage; want 1", chat)
		}
	})
}
