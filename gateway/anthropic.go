package gateway

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/anthropic"
	"github.com/belay-run/belay/failure"
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
		cacheWrites: cacheWrites(body)}
	if n, ok := anthropic.MaxOutputTokens(r); ok {
		out.maxOutput = n
	}
	return out, nil
}

// ttl1h is a cache_control's 1-hour lifetime.
var ttl1h = regexp.MustCompile(`"ttl"\s*:\s*"1h"`)

// cacheWrites says what a Messages request may write into Anthropic's
// prompt cache, read from its body: nothing without a "cache_control"
// member (on system or content blocks, tools, or the request itself), a
// 5-minute write with one, a 1-hour write when one has "ttl": "1h" (a
// 1-hour write bills 2× input, a 5-minute one 1.25×). Inside a JSON string
// the member's quotes would be escaped, so a message that only mentions
// cache_control does not count.
func cacheWrites(body []byte) budget.CacheWrites {
	i := bytes.Index(body, []byte(`"cache_control"`))
	switch {
	case i < 0:
		return budget.NoCacheWrites
	case ttl1h.Match(body[i:]):
		return budget.CacheWrites1h
	}
	return budget.CacheWrites5m
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

func (s *anthropicStream) answer() []byte { return s.acc.Answer() }

func (s *anthropicStream) reported() bool {
	_, ok := s.acc.Usage()
	return ok
}

func (s *anthropicStream) usage() (dialect.Usage, bool) {
	u := s.acc.Estimate(s.prompt)
	_, reported := s.acc.Usage()
	return u, !reported || !s.acc.Complete()
}
