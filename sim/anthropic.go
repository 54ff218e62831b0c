package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"

	"github.com/belay-run/belay/dialect"

	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/dialect/sse"
	"github.com/belay-run/belay/retry"
)

// anthropicWire renders the Anthropic Messages dialect.
type anthropicWire struct{}

func (anthropicWire) parse(body []byte) (*exchange, error) {
	req, err := anthropic.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	max, _ := anthropic.MaxOutputTokens(req)
	ex := &exchange{
		model: req.Model, stream: req.Stream, includeUsage: true, maxOut: max,
		promptTokens: anthropic.EstimatePromptTokens(req), conv: fromAnthropic(req),
	}
	// Structured outputs: output_config.format, or the beta's
	// output_format.
	type format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	var oc *struct {
		Format *format `json:"format"`
	}
	var of *format
	_ = dialect.DecodeMember(body, "output_config", &oc)
	_ = dialect.DecodeMember(body, "output_format", &of)
	if oc != nil && oc.Format != nil {
		of = oc.Format
	}
	if of != nil && of.Type == "json_schema" {
		ex.jsonOut, ex.schema = true, of.Schema
	}
	return ex, nil
}

func (anthropicWire) idHeader() string { return "Request-Id" }

func (anthropicWire) ids(ex *exchange, rng *rand.Rand, calls int) []string {
	ex.requestID = randID(rng, "req_011C", 20)
	ex.messageID = randID(rng, "msg_01", 22)
	out := make([]string, calls)
	for i := range out {
		out[i] = randID(rng, "toolu_01", 22)
	}
	return out
}

func (anthropicWire) writeError(w http.ResponseWriter, status int, errType, _ string, msg string) {
	anthropic.WriteError(w, status, errType, msg)
}

func (anthropicWire) writeInvalid(w http.ResponseWriter, _ string, msg string) {
	anthropic.WriteError(w, http.StatusBadRequest, "invalid_request_error", msg)
}

func (a anthropicWire) writeFault(w http.ResponseWriter, f Fault, ex *exchange) {
	h := w.Header()
	switch f {
	case RateLimit:
		anthropic.SetRetryAfter(h, ex.retryAfter.Milliseconds())
		h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		a.writeError(w, 429, "rate_limit_error", "",
			"This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.")
	case Overloaded:
		h.Set("X-Should-Retry", "true")
		a.writeError(w, 529, "overloaded_error", "", "Overloaded")
	case ServerError:
		a.writeError(w, 500, "api_error", "", "Internal server error")
	case Unavailable:
		a.writeError(w, 503, "api_error", "", "Service unavailable")
	case QuotaExhausted:
		a.writeError(w, 402, "billing_error", "",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.")
	case AuthError:
		a.writeError(w, 401, "authentication_error", "", "invalid x-api-key")
	case ContextLength:
		a.writeError(w, 400, "invalid_request_error", "", fmt.Sprintf("prompt is too long: %d tokens > 200000 maximum", max(ex.promptTokens, 200001)))
	case ErrorIn200:
		writeRaw(w, 200, "application/json",
			fmt.Sprintf(`{"type":"error","error":{"type":"api_error","message":"Internal server error"},"request_id":%q}`, ex.requestID))
	case BadGatewayHTML:
		writeHTML502(w)
	}
}

// blocks returns the response content and stop reason: "max_tokens" for a
// cut reply, "tool_use" with tool calls, else "end_turn". A call whose
// arguments were cut has input {} in the content; partial holds its cut
// input JSON, which a stream sends.
func (anthropicWire) blocks(r reply) (content []anthropic.ContentBlock, stop, partial string) {
	stop = "end_turn"
	if len(r.calls) > 0 {
		stop = "tool_use"
	}
	if r.cut {
		stop = "max_tokens"
	}
	if r.text != "" || len(r.calls) == 0 {
		content = append(content, anthropic.ContentBlock{Type: "text", Text: r.text})
	}
	for _, c := range r.calls {
		input := json.RawMessage(c.args)
		if c.partial {
			partial, input = c.args, json.RawMessage("{}")
		}
		content = append(content, anthropic.ContentBlock{Type: "tool_use", ID: c.id, Name: c.name, Input: input})
	}
	return content, stop, partial
}

func (a anthropicWire) body(ex *exchange, r reply) []byte {
	content, stop, _ := a.blocks(r)
	b, _ := json.Marshal(anthropic.Response{
		ID: ex.messageID, Type: "message", Role: "assistant", Model: ex.model,
		Content: content, StopReason: &stop, Usage: anthropic.FromDialect(ex.usage(r)),
	})
	return b
}

type namedEvent struct {
	name string
	data []byte
}

func event(v any) namedEvent {
	b, _ := json.Marshal(v)
	var t struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &t)
	return namedEvent{t.Type, b}
}

// blockStart is a content_block_start's block, with the empty text and
// input fields Anthropic sends.
type blockStart struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

func (a anthropicWire) stream(w http.ResponseWriter, r *http.Request, ex *exchange, rep reply, p streamPlan) {
	content, stop, partial := a.blocks(rep)
	u := anthropic.FromDialect(ex.usage(rep))
	start := u
	start.OutputTokens = 1
	events := []namedEvent{event(map[string]any{"type": anthropic.EventMessageStart, "message": anthropic.Response{
		ID: ex.messageID, Type: "message", Role: "assistant", Model: ex.model,
		Content: []anthropic.ContentBlock{}, Usage: start,
	}})}
	for i, b := range content {
		idx := i
		var bs blockStart
		var deltas []anthropic.Delta
		if b.Type == "text" {
			empty := ""
			bs = blockStart{Type: "text", Text: &empty}
			for _, piece := range pieces(b.Text, 16) {
				deltas = append(deltas, anthropic.Delta{Type: "text_delta", Text: piece})
			}
		} else {
			bs = blockStart{Type: "tool_use", ID: b.ID, Name: b.Name, Input: json.RawMessage("{}")}
			args := string(b.Input)
			if partial != "" && i == len(content)-1 {
				args = partial
			}
			for _, piece := range pieces(args, 12) {
				deltas = append(deltas, anthropic.Delta{Type: "input_json_delta", PartialJSON: &piece})
			}
		}
		events = append(events, event(map[string]any{"type": anthropic.EventContentBlockStart, "index": idx, "content_block": bs}))
		if i == 0 {
			events = append(events, event(anthropic.Event{Type: anthropic.EventPing}))
		}
		for _, d := range deltas {
			events = append(events, event(anthropic.Event{Type: anthropic.EventContentBlockDelta, Index: &idx, Delta: &d}))
		}
		events = append(events, event(anthropic.Event{Type: anthropic.EventContentBlockStop, Index: &idx}))
	}
	events = append(events,
		event(map[string]any{"type": anthropic.EventMessageDelta,
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": u.OutputTokens}}),
		event(anthropic.Event{Type: anthropic.EventMessageStop}))

	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	_ = sse.Flush(w)
	if retry.Sleep(r.Context(), p.firstDelay) != nil {
		return
	}
	for i, ev := range events {
		if p.stopAfter >= 0 && i == p.stopAfter+2 { // after message_start, a block start and some content
			if p.fail {
				_, _ = w.Write(anthropic.ErrorEvent("overloaded_error", "Overloaded"))
				_ = sse.Flush(w)
			}
			return
		}
		if i > 0 && retry.Sleep(r.Context(), p.chunkDelay) != nil {
			return
		}
		if sse.Write(w, ev.name, ev.data) != nil {
			return
		}
	}
}

// countTokens serves POST /v1/messages/count_tokens as Anthropic does
// (https://docs.claude.com/en/api/messages-count-tokens): a Messages
// request without max_tokens, answered {"input_tokens": N} with the
// simulator's own estimate of the prompt (the same as its usage reports).
// The deployment's fault profile applies as to a model call (a deployment
// that is down cannot count either), without its latency; counts are not
// in /sim/stats.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	wr := anthropicWire{}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		wr.writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", "", "Request exceeds the maximum allowed number of bytes.")
		return
	}
	if !s.authorized(r) {
		wr.writeFault(w, AuthError, &exchange{})
		return
	}
	var req anthropic.Request
	if err := dialect.DecodeObject(body, &req); err != nil {
		wr.writeInvalid(w, "", err.Error())
		return
	}
	req.Raw = body
	switch {
	case req.Model == "":
		wr.writeInvalid(w, "model", "model: Field required")
		return
	case len(req.Messages) == 0:
		wr.writeInvalid(w, "messages", "messages: Field required")
		return
	}
	// The deployment's fault profile applies as to a model call, without
	// its latency: a deployment that is down cannot count either. A
	// request id, as on every Anthropic answer; both drawn from the
	// request, like the simulator's other draws.
	dep := r.PathValue("deployment")
	rng := s.requestRand(dep, r.Header.Get("X-Belay-Run-Id"), body)
	prof := s.profileFor(dep)
	fault := prof.Draw(rng)
	ex := &exchange{model: req.Model, requestID: randID(rng, "req_011C", 20)}
	ex.retryAfter = drawRetryAfter(rng, prof)
	w.Header().Set(wr.idHeader(), ex.requestID)
	if failBeforeAnswer(w, r, wr, ex, fault) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"input_tokens": anthropic.EstimatePromptTokens(&req)})
}
