package gateway

import (
	"net/http"
	"strings"

	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/dialect/openai"
	"github.com/belay-run/belay/failure"
)

// responsesFront serves POST /v1/responses, OpenAI's Responses API. It
// routes on the OpenAI aliases (a model's openai deployments, in order),
// and sends to each deployment's base URL + /responses: a deployment that
// does not serve the Responses API answers 404, which falls back to the
// next. Errors are OpenAI's error objects; a stream ends with the
// Responses error event (openai.ResponsesErrorEvent).
//
// State the provider keeps is not belay's: a request with
// previous_response_id or a conversation names a response stored in the
// account of the deployment that made it, which a fallback deployment of
// another account does not have (it answers 404 or 400, relayed as sent).
// A background request (background: true) is refused: its result is
// fetched later with GET /v1/responses/{id}, which belay does not serve.
type responsesFront struct{}

func (responsesFront) dialect() failure.Dialect { return failure.DialectOpenAI }

func (responsesFront) parse(body []byte) (*request, error) {
	r, err := openai.ParseResponsesRequest(body)
	if err != nil {
		return nil, err
	}
	if r.Background != nil && *r.Background {
		return nil, dialect.Field("background", "is not served through belay: a background response is fetched later with "+
			"GET /v1/responses/{id}, which belay does not relay, and its cost would go unrecorded; send the request without it")
	}
	out := &request{model: r.Model, stream: r.Stream, promptTokens: openai.EstimateResponsesPromptTokens(r), body: body}
	if n, ok := r.MaxOutput(); ok {
		out.maxOutput = n
	}
	return out, nil
}

func (responsesFront) writeFailure(w http.ResponseWriter, e *failure.Error) {
	openai.WriteFailure(w, e)
}

// errorEvent is the error event of a stream whose follower is not at
// hand, numbered 0; responsesStream.errorEvent numbers it after the
// stream's last event.
func (responsesFront) errorEvent(e *failure.Error) []byte { return responsesErrorEvent(e, 0) }

func responsesErrorEvent(e *failure.Error, seq int64) []byte {
	s := openai.ErrorFor(e.Reason)
	return openai.ResponsesErrorEvent(s.Type, s.Code, message(e), seq)
}

func (responsesFront) newStream(r *request) streamFollower {
	return &responsesStream{prompt: r.promptTokens, acc: openai.ResponsesAccumulator{Keep: r.keepAnswer}}
}

// answerMember: a response object always has its "output" array.
func (responsesFront) answerMember() string { return "output" }

func (responsesFront) usage(body []byte) (dialect.Usage, bool) {
	u, ok := openai.ResponsesUsageOf(body)
	if !ok {
		return dialect.Usage{}, false
	}
	return u.Dialect(), true
}

// upstreamURL follows the OpenAI SDKs: the base URL includes /v1.
func (responsesFront) upstreamURL(base string) string {
	return strings.TrimRight(base, "/") + "/responses"
}

func (responsesFront) setAuth(h http.Header, key string) { openAIFront{}.setAuth(h, key) }

// responsesStream follows a Responses stream. Usage always comes in its
// final response event: nothing is asked for, stripped or rewritten.
type responsesStream struct {
	acc    openai.ResponsesAccumulator
	prompt int64
}

func (s *responsesStream) add(_ string, data []byte) { s.acc.Add(data) }
func (s *responsesStream) strip(string, []byte) bool { return false }
func (s *responsesStream) rewrite(raw []byte) []byte { return raw }
func (s *responsesStream) answer() []byte            { return s.acc.Answer() }
func (s *responsesStream) reported() bool            { _, ok := s.acc.Usage(); return ok }
func (s *responsesStream) errorEvent(e *failure.Error) []byte {
	return responsesErrorEvent(e, s.acc.NextSequence())
}

func (s *responsesStream) usage() (dialect.Usage, bool) {
	if u, ok := s.acc.Usage(); ok {
		return u, false
	}
	return s.acc.Estimate(s.prompt), true
}
