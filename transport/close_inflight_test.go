package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/run"
	"github.com/belay-run/belay/store/open"
	"github.com/belay-run/belay/transport"
)

// Close lets a call in flight finish before it closes the store: the
// stream its caller reads after Close is charged and recorded, and a
// request after Close is refused (adversarial review, session 26: the
// stream ended well for its caller while its settle and record were lost
// to a closed store).
func TestCloseLetsACallInFlightFinish(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	cfg, err := config.Parse([]byte("store: sqlite://"+db+"\n"), "inline.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.Open(ctx, cfg, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.StartRun(ctx, run.Spec{ID: "closing"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(transport.WithRunID(ctx, r.ID()), "POST", "http://belay.invalid/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"max_tokens":400,`+
			`"messages":[{"role":"user","content":"tell me a long story"}]}`))
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 64)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- tr.Close(ctx) }()
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), "data: [DONE]") {
		t.Fatalf("the rest of the stream: %v, %q", err, rest)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := (&http.Client{Transport: tr}).Post("http://belay.invalid/v1/chat/completions", "application/json",
		strings.NewReader(`{}`)); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("a request after Close: %v; want ErrClosed", err)
	}
	st, err := open.Open(ctx, "sqlite://"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.GetRun(ctx, r.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Turns != 1 || rec.Cost == 0 || rec.OutputTokens == 0 {
		t.Errorf("stored record after Close: %d turns, cost %s, %d output tokens; want the streamed call charged", rec.Turns, rec.Cost, rec.OutputTokens)
	}
}
