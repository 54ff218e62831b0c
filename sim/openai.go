package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/retry"
)

// openaiWire renders the OpenAI Chat Completions dialect.
type openaiWire struct{}

func (openaiWire) parse(body []byte) (*exchange, error) {
	req, err := openai.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	max, _ := openai.MaxOutputTokens(req)
	ex := &exchange{
		model: req.Model, stream: req.Stream, includeUsage: req.IncludeUsage(), maxOut: max, choices: req.Choices(),
		promptTokens: openai.EstimatePromptTokens(req), conv: fromOpenAI(req),
	}
	var rf *struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if dialect.DecodeMember(body, "response_format", &rf) == nil && rf != nil && (rf.Type == "json_schema" || rf.Type == "json_object") {
		ex.jsonOut, ex.schema = true, rf.JSONSchema.Schema
	}
	return ex, nil
}

func (openaiWire) idHeader() string { return "X-Request-Id" }

func (openaiWire) ids(ex *exchange, rng *rand.Rand, calls int) []string {
	ex.requestID = "req_" + randHex(rng, 32)
	ex.messageID = randID(rng, "chatcmpl-", 29)
	out := make([]string, calls)
	for i := range out {
		out[i] = randID(rng, "call_", 24)
	}
	return out
}

func (openaiWire) writeError(w http.ResponseWriter, status int, errType, code, msg string) {
	openai.WriteError(w, status, errType, code, msg)
}

func (openaiWire) writeInvalid(w http.ResponseWriter, param, msg string) {
	e := openai.NewError("invalid_request_error", "", msg)
	if param != "" {
		e.Param = &param
	}
	openai.WriteErrorObject(w, http.StatusBadRequest, e)
}

func (o openaiWire) writeFault(w http.ResponseWriter, f Fault, ex *exchange) {
	h := w.Header()
	switch f {
	case RateLimit:
		ms := ex.retryAfter.Milliseconds()
		openai.SetRetryAfter(h, ms)
		h.Set("X-Ratelimit-Limit-Requests", "500")
		h.Set("X-Ratelimit-Remaining-Requests", "0")
		h.Set("X-Ratelimit-Reset-Requests", fmt.Sprintf("%dms", ms))
		o.writeError(w, 429, "requests", "rate_limit_exceeded", fmt.Sprintf(
			"Rate limit reached for %s in organization org-sim on requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in %dms.",
			ex.model, ms))
	case Overloaded:
		o.writeError(w, 503, "server_error", "", "The engine is currently overloaded, please try again later.")
	case ServerError:
		o.writeError(w, 500, "server_error", "", "The server had an error while processing your request. Sorry about that!")
	case Unavailable:
		o.writeError(w, 503, "server_error", "", "The server is temporarily unable to service your request. Please try again later.")
	case QuotaExhausted:
		o.writeError(w, 429, "insufficient_quota", "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details.")
	case AuthError:
		o.writeError(w, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-****. You can find your API key at the provider's dashboard.")
	case ContextLength:
		o.writeError(w, 400, "invalid_request_error", "context_length_exceeded", fmt.Sprintf(
			"This model's maximum context length is 128000 tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
			max(ex.promptTokens, 128001)))
	case ErrorIn200:
		writeRaw(w, 200, "application/json",
			`{"error":{"message":"Upstream provider returned an error","code":502,"metadata":{"provider_name":"sim"}},"user_id":"user_sim"}`)
	case BadGatewayHTML:
		writeHTML502(w)
	}
}

func (openaiWire) body(ex *exchange, r reply) []byte {
	msg := openai.ResponseMessage{Role: "assistant", Annotations: []any{}}
	if r.text != "" || len(r.calls) == 0 {
		text := r.text
		msg.Content = &text
	}
	for _, c := range r.calls {
		msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: c.id, Type: "function",
			Function: openai.FunctionCall{Name: c.name, Arguments: c.args}})
	}
	finish := openAIFinish(r)
	u := openai.FromDialect(ex.usage(r))
	choices := make([]openai.Choice, max(ex.choices, 1)) // n choices: the scripted reply n times
	for i := range choices {
		choices[i] = openai.Choice{Index: i, Message: msg, FinishReason: finish}
	}
	b, _ := json.Marshal(openai.Completion{
		ID: ex.messageID, Object: "chat.completion", Created: ex.created, Model: ex.model,
		Choices:           choices,
		Usage:             &u,
		SystemFingerprint: "fp_sim",
		ServiceTier:       "default",
	})
	return b
}

func (openaiWire) stream(w http.ResponseWriter, r *http.Request, ex *exchange, rep reply, p streamPlan) {
	var events [][]byte
	finish := openAIFinish(rep)
	empty := ""
	// n choices: each choice's events in turn, told apart by their index.
	for ci := range int(max(ex.choices, 1)) {
		chunk := func(d openai.Delta, finish *string) []byte {
			b, _ := json.Marshal(openai.Chunk{
				ID: ex.messageID, Object: "chat.completion.chunk", Created: ex.created, Model: ex.model,
				SystemFingerprint: "fp_sim",
				Choices:           []openai.ChunkChoice{{Index: ci, Delta: d, FinishReason: finish}},
			})
			return b
		}
		first := len(events)
		if rep.text != "" || len(rep.calls) == 0 {
			events = append(events, chunk(openai.Delta{Role: "assistant", Content: &empty}, nil))
			for _, piece := range pieces(rep.text, 16) {
				events = append(events, chunk(openai.Delta{Content: &piece}, nil))
			}
		}
		for i, c := range rep.calls {
			head := openai.ToolCallDelta{Index: i, ID: c.id, Type: "function", Function: openai.FunctionDelta{Name: c.name}}
			d := openai.Delta{ToolCalls: []openai.ToolCallDelta{head}}
			if len(events) == first {
				d.Role = "assistant"
			}
			events = append(events, chunk(d, nil))
			for _, piece := range pieces(c.args, 12) {
				events = append(events, chunk(openai.Delta{ToolCalls: []openai.ToolCallDelta{{Index: i, Function: openai.FunctionDelta{Arguments: piece}}}}, nil))
			}
		}
		events = append(events, chunk(openai.Delta{}, &finish))
	}
	if ex.includeUsage {
		u := openai.FromDialect(ex.usage(rep))
		b, _ := json.Marshal(openai.Chunk{ID: ex.messageID, Object: "chat.completion.chunk", Created: ex.created,
			Model: ex.model, SystemFingerprint: "fp_sim", Choices: []openai.ChunkChoice{}, Usage: &u})
		events = append(events, b)
	}
	events = append(events, []byte(openai.Done))

	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	_ = sse.Flush(w)
	if retry.Sleep(r.Context(), p.firstDelay) != nil {
		return
	}
	for i, data := range events {
		if i == p.stopAfter {
			if p.fail {
				_, _ = w.Write(openai.ErrorEvent("server_error", "", "The server had an error while processing your request."))
				_ = sse.Flush(w)
			}
			return
		}
		if i > 0 && retry.Sleep(r.Context(), p.chunkDelay) != nil {
			return
		}
		if sse.Write(w, "", data) != nil {
			return
		}
	}
}

// openAIFinish is the reply's finish_reason: "length" when it was cut,
// "tool_calls" when it calls tools, else "stop".
func openAIFinish(r reply) string {
	switch {
	case r.cut:
		return "length"
	case len(r.calls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func writeRaw(w http.ResponseWriter, status int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// writeHTML502 writes a CDN's bad-gateway page, as a proxy in front of a
// provider sends it (cases/wire/proxy-502-html-page.json).
func writeHTML502(w http.ResponseWriter) {
	w.Header().Set("Server", "cloudflare")
	w.Header().Del("X-Request-Id")
	w.Header().Del("Request-Id")
	writeRaw(w, http.StatusBadGateway, "text/html; charset=UTF-8",
		"<!DOCTYPE html>\n<html><head><title>api.example.com | 502: Bad gateway</title></head><body><h1>Bad gateway</h1><p>Error code 502</p><p>The web server reported a bad gateway error.</p></body></html>\n")
}

func randHex(rng *rand.Rand, n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = hex[rng.IntN(16)]
	}
	return string(b)
}
