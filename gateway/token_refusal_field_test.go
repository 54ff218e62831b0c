package gateway_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
	"github.com/belay-run/belay/store/memstore"
)

// A token-limit refusal names the output limit field of the caller's own
// API (adversary finding: the Responses API, which has no max_tokens, was
// told to lower max_tokens).
func TestTokenRefusalNamesTheAPIsField(t *testing.T) {
	stack, err := gateway.Build(t.Context(), config.Default(), gateway.Options{Store: memstore.New(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close(context.Background())
	h := stack.Server.Handler()
	for _, tc := range []struct{ path, body, hdr, want, not string }{
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"hi","max_output_tokens":500}`, "", "a lower max_output_tokens asks for less", "max_tokens "},
		{"/v1/responses", `{"model":"gpt-4o-mini","input":"hi"}`, "", "a call without max_output_tokens reserves 4096 output tokens", "a lower"},
		{"/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":500}`, "",
			"a lower max_completion_tokens (or max_tokens) asks for less", ""},
		{"/v1/messages", `{"model":"claude-sonnet-5-5","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key",
			"a lower max_tokens asks for less", "max_output_tokens"},
	} {
		req := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
		req.Header.Set("X-Belay-Max-Tokens", "10")
		if tc.hdr != "" {
			req.Header.Set("anthropic-version", "2023-06-01")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != 402 || !strings.Contains(body, tc.want) || (tc.not != "" && strings.Contains(body, tc.not)) {
			t.Errorf("%s %s: %d %s; want 402 saying %q", tc.path, tc.body, rec.Code, body, tc.want)
		}
	}
}
