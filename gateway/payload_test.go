package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/belay-run/belay/trace"
)

// With capture full, a model call's span holds its messages; with the
// default (redacted), an email address in them is removed before storing.
func TestCapturedMessages(t *testing.T) {
	for _, c := range []struct{ capture, want, notWant string }{
		{"full", "ada@example.com", ""},
		{"redacted", "[REDACTED:email]", "ada@example.com"},
	} {
		t.Run(c.capture, func(t *testing.T) {
			h := newHarness(t, harnessOpts{extra: "capture: " + c.capture + "\n"})
			ctx := context.Background()
			var resp *http.Response
			_, err := h.openai().Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
				Messages: userMsg("my email is ada@example.com")}, ooption.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			id := resp.Header.Get("X-Belay-Run-Id")
			if err := h.stack.Runs.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := h.stack.Recorder.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			spans, err := h.stack.Store.RunSpans(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var in, out string
			for _, s := range spans {
				if s.Kind == trace.KindModel {
					in, _ = s.Attrs[trace.AttrInputMessages].(string)
					out, _ = s.Attrs[trace.AttrOutputMessages].(string)
					if a := s.Attrs[trace.AttrAlias]; a != "gpt-4o-mini" {
						t.Errorf("span %s: %s = %v, want the alias asked for", s.Name, trace.AttrAlias, a)
					}
				}
			}
			if !strings.Contains(in, c.want) || (c.notWant != "" && strings.Contains(in, c.notWant)) {
				t.Errorf("input messages %q; want %q and not %q", in, c.want, c.notWant)
			}
			if !strings.Contains(out, "assistant") {
				t.Errorf("output messages %q; want the answer's message", out)
			}
			if body := scrape(t, h, "/metrics"); !strings.Contains(body, "belay_store_write_failures_total 0") {
				t.Errorf("metrics lack belay_store_write_failures_total")
			}
		})
	}
}
