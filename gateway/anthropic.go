package gateway

import (
	"net/http"
	"strings"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/failure"
	"github.com/belay-run/belay/internal/fastjson"
)

// AnthropicVersion is the anthropic-version header belay sends upstream
// when the client sent none (https://docs.claude.com/en/api/versioning).
const AnthropicVersion = "2023-06-01"

// anthropicFront serves POST /v1/messages.
type anthropicFront struct{}

func (anthropicFront) dialect() failure.Dialect { return failure.DialectAnthropic }

func (anthropicFront) parse(body []byte) (*request, error) {
	r, err := anthropic.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	out := &request{model: r.Model, stream: r.Stream, promptTokens: anthropic.EstimatePromptTokens(r), body: body,
		cacheWrites: cacheWrites(r), limitField: "max_tokens", webSearches: anthropic.WebSearches(r)}
	if n, ok := anthropic.MaxOutputTokens(r); ok {
		out.maxOutput = n
	}
	return out, nil
}

// cacheWrites says what a Messages request may write into Anthropic's
// prompt cache (anthropic.CacheWrites): nothing, a 5-minute write (billed
// 1.25× input) or a 1-hour one (2×).
func cacheWrites(r *anthropic.Request) budget.CacheWrites {
	switch some, hour := anthropic.CacheWrites(r); {
	case hour:
		return budget.CacheWrites1h
	case some:
		return budget.CacheWrites5m
	}
	return budget.NoCacheWrites
}

func (anthropicFront) writeFailure(w http.ResponseWriter, e *failure.Error) {
	anthropic.WriteFailure(w, e)
}

func (anthropicFront) errorEvent(e *failure.Error) []byte {
	return anthropic.ErrorEvent(anthropic.ErrorFor(e.Reason).Type, message(e))
}

func (anthropicFront) newStream(r *request) streamFollower {
	return &anthropicStream{prompt: r.promptTokens, acc: anthropic.Accumulator{Keep: r.keepAnswer}}
}

// usage decodes only the body's top-level "usage" member.
func (anthropicFront) answerMember() string { return "content" }

func (anthropicFront) usage(body []byte) (dialect.Usage, bool) {
	var u *anthropic.Usage
	if dialect.DecodeMember(body, "usage", &u) != nil || u == nil {
		return dialect.Usage{}, false
	}
	return u.Dialect(), true
}

// toolCalls counts a message body's web searches from its content, for
// the estimate of one without usage (see attemptOnce).
func (anthropicFront) toolCalls(body []byte) (web, file int64) {
	return anthropic.ContentWebSearches(body), 0
}

// upstreamURL follows the Anthropic SDKs: the base URL has no /v1.
func (anthropicFront) upstreamURL(base string) string {
	return strings.TrimRight(base, "/") + anthropic.Path
}

func (anthropicFront) setAuth(h http.Header, key string) {
	if key != "" {
		h.Set("X-Api-Key", key)
	}
	if h.Get("Anthropic-Version") == "" {
		h.Set("Anthropic-Version", AnthropicVersion)
	}
}

// anthropicStream follows a Messages stream.
type anthropicStream struct {
	acc    anthropic.Accumulator
	prompt int64
}

func (s *anthropicStream) add(_ string, data []byte) { _ = s.acc.Add(data) }
func (s *anthropicStream) strip(string, []byte) bool { return false }

func (s *anthropicStream) rewrite(raw []byte) []byte { return raw }

func (s *anthropicStream) answer() []byte { return s.acc.Answer() }

func (s *anthropicStream) reported() bool {
	_, ok := s.acc.Usage()
	return ok
}

func (s *anthropicStream) usage() (dialect.Usage, bool) {
	u := s.acc.Estimate(s.prompt)
	return u, !s.acc.Final() || !s.acc.Complete()
}

// answerFacts reads a message's id, model and stop_reason.
func (anthropicFront) answerFacts(body []byte) (id, model string, finish []string) {
	var b struct {
		ID         string `json:"id"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
	}
	if fastjson.Unmarshal(body, &b) != nil {
		return "", "", nil
	}
	if b.StopReason != "" {
		finish = []string{b.StopReason}
	}
	return b.ID, b.Model, finish
}

// facts returns the streamed message's id, model and stop_reason.
func (s *anthropicStream) facts() (string, string, []string) {
	var finish []string
	if r := s.acc.StopReason(); r != "" {
		finish = []string{r}
	}
	return s.acc.ID(), s.acc.Model(), finish
}
