package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/fastjson"
)

// openAIFront serves POST /v1/chat/completions.
type openAIFront struct{}

func (openAIFront) dialect() failure.Dialect { return failure.DialectOpenAI }

func (openAIFront) parse(body []byte) (*request, error) {
	r, err := openai.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	out := &request{model: r.Model, stream: r.Stream, promptTokens: openai.EstimatePromptTokens(r), body: body,
		limitField: "max_completion_tokens (or max_tokens)", api: "chat_completions", priority: openai.AskedPriority(r.ServiceTier)}
	if n, ok := openai.MaxOutputTokens(r); ok {
		out.maxOutput = n
	}
	if k := r.Choices(); k > 1 {
		// Each of the n choices may run to the output limit, and each is
		// billed: the reservation covers them all.
		if out.maxOutput == 0 {
			out.maxOutput = DefaultReserveOutputTokens
		}
		// Saturating: a product past int64 would wrap to a small (or
		// negative) reservation and let the call through.
		if out.maxOutput > math.MaxInt64/k {
			out.maxOutput = math.MaxInt64
		} else {
			out.maxOutput *= k
		}
	}
	if r.Stream && !r.IncludeUsage() {
		// Ask upstream for the usage chunk so the call is charged from
		// real counts; the chunk is stripped from the client's stream.
		opts := map[string]json.RawMessage{"include_usage": json.RawMessage("true")}
		if r.StreamOptions != nil {
			// The client's other options go on as sent (raw: a number keeps
			// its digits).
			var raw map[string]json.RawMessage
			var sent json.RawMessage
			if dialect.DecodeMember(body, "stream_options", &sent) == nil && json.Unmarshal(sent, &raw) == nil {
				for k, v := range raw {
					if !strings.EqualFold(k, "include_usage") {
						opts[k] = v
					}
				}
			}
		}
		b, err := setMember(body, "stream_options", opts)
		if err != nil {
			return nil, dialect.DecodeError(err)
		}
		out.body, out.addedUsage = b, true
	}
	return out, nil
}

func (openAIFront) writeFailure(w http.ResponseWriter, e *failure.Error) { openai.WriteFailure(w, e) }

func (openAIFront) errorEvent(e *failure.Error) []byte {
	s := openai.ErrorFor(e.Reason)
	return openai.ErrorEvent(s.Type, s.Code, message(e))
}

func (openAIFront) newStream(r *request) streamFollower {
	return &openAIStream{addedUsage: r.addedUsage, prompt: r.promptTokens, acc: openai.Accumulator{Keep: r.keepAnswer}}
}

// usage decodes only the body's top-level "usage" member (as
// openai.Completion's Usage field); the rest of the body is checked to be
// a JSON object, not decoded.
func (openAIFront) answerMember() string { return "choices" }

func (openAIFront) usage(body []byte) (dialect.Usage, bool) {
	u, ok := openai.ResponseUsageOfValid(body) // answerFault checked it
	if !ok {
		return dialect.Usage{}, false
	}
	d := u.Dialect()
	d.Tier = openai.ServedTier(body)
	return d, true
}

// upstreamURL follows the OpenAI SDKs: the base URL includes /v1.
func (openAIFront) upstreamURL(base string) string {
	return strings.TrimRight(base, "/") + "/chat/completions"
}

func (openAIFront) setAuth(h http.Header, key string) {
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
}

// openAIStream follows a Chat Completions stream.
type openAIStream struct {
	acc        openai.Accumulator
	addedUsage bool
	prompt     int64
}

func (s *openAIStream) add(_ string, data []byte) { _ = s.acc.Add(data) }

// strip drops the usage-only chunk (empty choices, usage set) when the
// client did not ask for it.
func (s *openAIStream) strip(_ string, data []byte) bool {
	if !s.addedUsage || !bytes.Contains(data, []byte(`"usage"`)) {
		return false
	}
	var c struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if fastjson.Unmarshal(data, &c) != nil {
		return false
	}
	return len(c.Choices) == 0 && len(c.Usage) > 0 && string(c.Usage) != "null"
}

// nullUsage is the member every chunk carries when stream_options asks
// for usage; belay asked it on the client's behalf.
var nullUsage = []byte(`,"usage":null`)

// rewrite drops the `"usage":null` member that every chunk carries once
// include_usage is on, when belay asked for it and the client did not: a
// provider would not have sent it to this client (a test with the official
// SDKs found it on every chunk). Inside a JSON string the quotes would be
// escaped, so the bytes can only be that member.
func (s *openAIStream) rewrite(raw []byte) []byte {
	if !s.addedUsage {
		return raw
	}
	i := bytes.Index(raw, nullUsage)
	if i < 0 {
		return raw
	}
	return append(raw[:i:i], raw[i+len(nullUsage):]...)
}

func (s *openAIStream) answer() []byte { return s.acc.Answer() }

func (s *openAIStream) reported() bool {
	_, ok := s.acc.Usage()
	return ok
}

func (s *openAIStream) usage() (dialect.Usage, bool) {
	if u, ok := s.acc.Usage(); ok {
		return u, false
	}
	return s.acc.Estimate(s.prompt), true
}

// message is the text of a failure as shown to a client.
func message(e *failure.Error) string {
	if e.Message != "" {
		return e.Message
	}
	return string(e.Reason)
}

// answerFacts reads a chat completion's id, model and each choice's
// finish_reason.
func (openAIFront) answerFacts(body []byte) (id, model string, finish []string) {
	var b struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if fastjson.Unmarshal(body, &b) != nil {
		return "", "", nil
	}
	for _, c := range b.Choices {
		finish = append(finish, c.FinishReason)
	}
	return b.ID, b.Model, finish
}

// facts returns the stream's completion id, model and finish reasons.
func (s *openAIStream) facts() (string, string, []string) {
	return s.acc.ID(), s.acc.Model(), s.acc.FinishReasons()
}
