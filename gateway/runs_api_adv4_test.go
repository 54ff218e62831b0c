package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
)

// The official SDKs streaming a call whose run the agent's supervisor
// ends mid-stream: the stream must end with an error the SDK raises, not
// as a clean (truncated) answer.
func TestAdvEndMidStreamSDKs(t *testing.T) {
	started := make(chan struct{}, 4)
	oaUp := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, roleChunk+chunk("Hel"))
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
	})
	anUp := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-5-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
		fmt.Fprint(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n")
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
	})
	y := aliasRetrying(1, `  - alias: c
    deployments:
      - {name: a, provider: anthropic, model: claude-sonnet-5-5, base_url: "`+anUp.URL+`", api_key: k}
`, openAIDep("d", "gpt-4o", oaUp.URL))
	g := newGW(t, y, nil)
	ctx := context.Background()

	t.Run("openai", func(t *testing.T) {
		c := openai.NewClient(ooption.WithBaseURL(g.srv.URL+"/v1/"), ooption.WithAPIKey("x"), ooption.WithHeader("X-Belay-Run-Id", "sdk-oa"))
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", Messages: userMsg("hi"), MaxTokens: openai.Int(100)})
		text := ""
		ended := false
		for s.Next() {
			for _, ch := range s.Current().Choices {
				text += ch.Delta.Content
			}
			if text == "Hel" && !ended {
				ended = true
				awaitCh(t, started, "upstream start")
				if resp, out := g.do("POST", "/v1/belay/runs/sdk-oa/end", `{"status":"failed","error":"supervisor stopped it"}`); resp.StatusCode != 200 {
					t.Fatalf("end: %d %s", resp.StatusCode, out)
				}
			}
		}
		t.Logf("openai: text %q, err %v", text, s.Err())
		if s.Err() == nil {
			t.Errorf("openai-go: the stream of a call whose run was ended finished without an error (text %q)", text)
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		c := anthropic.NewClient(aoption.WithBaseURL(g.srv.URL), aoption.WithAPIKey("x"), aoption.WithHeader("X-Belay-Run-Id", "sdk-an"))
		s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "c", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		text := ""
		ended := false
		for s.Next() {
			ev := s.Current()
			if ev.Type == "content_block_delta" {
				text += ev.Delta.Text
			}
			if text == "Hel" && !ended {
				ended = true
				awaitCh(t, started, "upstream start")
				if resp, out := g.do("POST", "/v1/belay/runs/sdk-an/end", `{"status":"failed","error":"supervisor stopped it"}`, "Anthropic-Version", "2023-06-01"); resp.StatusCode != 200 {
					t.Fatalf("end: %d %s", resp.StatusCode, out)
				}
			}
		}
		t.Logf("anthropic: text %q, err %v", text, s.Err())
		if s.Err() == nil {
			t.Errorf("anthropic-sdk-go: the stream of a call whose run was ended finished without an error (text %q)", text)
		}
	})
}
