package gateway

import (
	"encoding/json"
	"net/http"

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
	// usage reads the usage of a complete non-streamed response body.
	usage(body []byte) (dialect.Usage, bool)
	// upstreamURL returns the endpoint URL for a deployment's base URL.
	upstreamURL(base string) string
	// setAuth sets the credential and version headers on an upstream request.
	setAuth(h http.Header, apiKey string)
}

// request is what the gateway needs to know about one client request.
type request struct {
	model  string
	stream bool
	// promptTokens is the estimated prompt size, for the reservation and
	// for charging a cut stream that reported no usage.
	promptTokens int64
	// maxOutput is the request's output token limit over all its choices
	// (OpenAI n), 0 when unset.
	maxOutput int64
	// body is what is sent upstream (the model is rewritten per
	// deployment).
	body []byte
	// addedUsage is true when belay asked upstream for a usage chunk the
	// client did not ask for; the gateway then strips it from the client's
	// stream.
	addedUsage bool
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
	// usage returns the usage to charge and whether it is estimated.
	usage() (dialect.Usage, bool)
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
