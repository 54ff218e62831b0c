package gateway_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/gateway"
)

// records is a slog.Handler that sends each record's message and attributes
// to a channel, for a test to wait on a line logged after the answer.
type records chan string

func (records) Enabled(context.Context, slog.Level) bool { return true }
func (c records) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	c <- b.String()
	return nil
}
func (c records) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c records) WithGroup(string) slog.Handler      { return c }

// next returns the next line logged with message msg.
func (c records) next(t *testing.T, msg string) string {
	t.Helper()
	guard := time.NewTimer(10 * time.Second) // a failure guard, not a wait: the line comes as the call ends
	defer guard.Stop()
	for {
		select {
		case line := <-c:
			if strings.HasPrefix(line, msg+" ") {
				return line
			}
		case <-guard.C:
			t.Fatalf("no %q logged", msg)
		}
	}
}

// An upstream's 404 for a URL it does not serve (a base_url with a /v1
// too many or too few) names the deployment's base_url and the rule for
// its provider; a 404 for an unknown model does not (a newcomer read the
// first as model_not_found and looked for the model).
func TestUnknownURLNamesBaseURL(t *testing.T) {
	notFound := func(body string) string {
		return upstream(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, strings.ReplaceAll(body, "PATH", r.URL.Path))
		}).URL
	}
	oaURL := notFound(`{"error":{"message":"Unknown request URL: POST PATH. Please check the URL for typos.","type":"invalid_request_error","param":null,"code":"unknown_url"}}`)
	anURL := notFound(`{"type":"error","error":{"type":"not_found_error","message":"Not Found"}}`)
	modelURL := notFound(`{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
	logged := make(records, 256)
	g := newGWOpts(t, oaAnConfig(oaURL, anURL+"/anthropic", "",
		fmt.Sprintf("  - alias: gone\n    deployments: [{name: gone-1, provider: openai, model: gpt-4o, base_url: %q, api_key: k}]\n", modelURL+"/v1")),
		gateway.Options{Logger: slog.New(logged)})

	for _, c := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"oa","messages":[{"role":"user","content":"hi"}]}`,
			"the upstream has no such URL: check deployment oa-1's base_url in the gateway's config; an openai deployment's base_url ends in /v1"},
		{"/v1/messages", `{"model":"an","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`,
			"the upstream has no such URL: check deployment an-1's base_url in the gateway's config; an anthropic deployment's base_url has no /v1"},
	} {
		resp, b := g.do("POST", c.path, c.body)
		// The client gets the provider's error object as it came.
		if resp.StatusCode != http.StatusNotFound || strings.Contains(b, "base_url") {
			t.Errorf("%s: %d %s; want the provider's 404 as it came", c.path, resp.StatusCode, b)
		}
		if line := logged.next(t, "model call failed"); !strings.Contains(line, c.want) {
			t.Errorf("%s: logged %s\nwant it to contain %q", c.path, line, c.want)
		}
	}
	resp, b := g.do("POST", "/v1/chat/completions", `{"model":"gone","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(b, "does not exist") {
		t.Errorf("unknown model: %d %s; want the provider's 404", resp.StatusCode, b)
	}
	if line := logged.next(t, "model call failed"); !strings.Contains(line, "model_not_found") || strings.Contains(line, "base_url") {
		t.Errorf("unknown model: logged %s; want model_not_found without a base_url hint", line)
	}
}
