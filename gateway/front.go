package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/dialect"
	"github.com/belay-run/belay/failure"
)

// front is one client-facing dialect: how belay reads its requests, writes
// its errors, and follows its streams. There are two: openAIFront and
// anthropicFront.
type front interface {
	// dialect is the wire dialect name ("openai", "anthropic").
	dialect() failure.Dialect
	// parse decodes and validates a request body; errors are
	// *dialect.FieldError.
	parse(body []byte) (*request, error)
	// writeFailure writes e as this dialect's error response.
	writeFailure(w http.ResponseWriter, e *failure.Error)
	// errorEvent returns e as this dialect's in-stream error event.
	errorEvent(e *failure.Error) []byte
	// newStream returns a fresh stream follower.
	newStream(r *request) streamFollower
	// usage reads the usage of a complete non-streamed response body
	// that answerFault passed (valid JSON).
	usage(body []byte) (dialect.Usage, bool)
	// answerMember is the member a 2xx non-streamed response body of this
	// dialect always has, an array: "choices" (an OpenAI chat
	// completion), "content" (an Anthropic message). See answerFault.
	answerMember() string
	// upstreamURL returns the endpoint URL for a deployment's base URL.
	upstreamURL(base string) string
	// setAuth sets the credential and version headers on an upstream request.
	setAuth(h http.Header, apiKey string)
}

// answerFault returns why body, the whole body of a 2xx answer to a
// non-streamed call, is not an answer a client can use, or "": it must be
// one JSON object with the array member (see front.answerMember). An
// empty body, a cut one, plain text, an event stream, {} and [1,2] are
// not; a provider that answered with one is treated as having failed
// (ServerError: retried, then fallen back from), never relayed as a
// success.
func answerFault(body []byte, member string) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return "an empty body"
	}
	found := false
	err := dialect.EachMember(body, func(name, value []byte) {
		if string(name) == member { // the last one counts, as for a client's decoder
			found = len(value) > 0 && value[0] == '['
		}
	})
	switch {
	case err != nil:
		return fmt.Sprintf("not one JSON object (%d bytes: %s)", len(body), err)
	case !found:
		return fmt.Sprintf("a JSON object without the %q array", member)
	}
	return ""
}

// request is what the gateway needs to know about one client request.
type request struct {
	model  string
	stream bool
	// promptTokens is the estimated prompt size, for the reservation and
	// for charging a cut stream that reported no usage.
	promptTokens int64
	// cacheWrites is what the request may write into the provider's
	// prompt cache (Anthropic's cache_control): the reservation prices the
	// prompt at the write price.
	cacheWrites budget.CacheWrites
	// maxOutput is the request's output token limit over all its choices
	// (OpenAI n), 0 when unset.
	maxOutput int64
	// limitField names the request member that sets maxOutput in the
	// client's dialect, for refusals that advise setting it.
	limitField string
	// api is the OpenAI API called (trace.AttrOpenAIAPIType), "" for
	// Anthropic's.
	api string
	// previous is a Responses request's previous_response_id: its
	// context, which the provider bills again, is added to the prompt
	// when the gateway relayed it (see contextCache).
	previous string
	// body is what is sent upstream (the model is rewritten per
	// deployment).
	body []byte
	// addedUsage is true when belay asked upstream for a usage chunk the
	// client did not ask for; the gateway then strips it from the client's
	// stream.
	addedUsage bool
	// webSearches and fileSearches are the built-in tool calls the
	// reservation holds the fees of (see Admission.WebSearches).
	webSearches, fileSearches int64
	// priority is true when the request asks for priority processing
	// (OpenAI's service_tier "priority" or "fast"): it is reserved and,
	// when the answer does not say otherwise, charged at the priority
	// price (see Admission.Priority).
	priority bool
	// keepAnswer is true when the trace records payloads: a stream
	// follower then keeps the streamed answer (see streamFollower.answer).
	keepAnswer bool
}

// streamFollower folds one upstream stream, event by event, for what the
// failure.StreamWatcher does not say: the usage in the dialect's shape, and
// which events the client must not see.
type streamFollower interface {
	// add folds one event's data.
	add(name string, data []byte)
	// strip reports whether the event must not reach the client (the usage
	// chunk belay asked for on the client's behalf).
	strip(name string, data []byte) bool
	// rewrite returns the event raw as the client is sent it: raw itself,
	// or without what belay's own request added to it.
	rewrite(raw []byte) []byte
	// usage returns the usage to charge and whether it is estimated.
	usage() (dialect.Usage, bool)
	// reported reports whether the provider stated usage in the stream so
	// far (Anthropic's message_start; OpenAI's usage chunk).
	reported() bool
	// answer returns what the stream answered so far, in the shape of a
	// non-streamed answer's member (OpenAI choices, Anthropic content),
	// when the request's keepAnswer is set; nil otherwise.
	answer() []byte
}

// setMember returns body (a JSON object the request parser has decoded)
// with the top-level member key set to value; every other byte is kept.
func setMember(body []byte, key string, value any) ([]byte, error) {
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	return dialect.SetMemberValid(body, key, v)
}
