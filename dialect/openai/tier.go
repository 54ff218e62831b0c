package openai

import (
	"bytes"
	"encoding/json"

	"github.com/belay-run/belay/dialect"
)

// PriorityTier reports whether tier, a service_tier of a request or an
// answer (Chat Completions or Responses), names OpenAI's priority
// processing, which is billed above the standard prices: "priority", or
// "fast", its name since 2026-07-30 ("You can use either service_tier:
// priority or service_tier: fast in your API requests",
// https://openai.com/api-fast-mode/). "auto", "default", "flex" and
// "scale" are not priority processing.
func PriorityTier(tier string) bool { return tier == "priority" || tier == "fast" }

// AskedPriority reports whether a request's service_tier member (raw, as
// Request.ServiceTier and ResponsesRequest.ServiceTier keep it: escapes
// still in, the last of duplicate members) asks for priority processing.
func AskedPriority(raw json.RawMessage) bool { return PriorityTier(tierMember(raw)) }

// ServedTier returns the service_tier an answer body (a chat.completion
// or a response object) states at its top level: the tier that served
// the call ("default", "flex", "priority"; OpenAI API reference: "the
// response body will include the service_tier value based on the
// processing mode actually used to serve the request"), "" when it states
// none. The last of duplicate members counts, names matched as
// dialect.DecodeMember does; a body without the member's name (and
// without escapes) is not decoded.
func ServedTier(body []byte) string {
	if !bytes.Contains(body, []byte("service_tier")) && !bytes.Contains(body, []byte(`\u`)) {
		return ""
	}
	var raw json.RawMessage
	if dialect.DecodeMember(body, "service_tier", &raw) != nil {
		return ""
	}
	return tierMember(raw)
}

// tierMember decodes a service_tier value, a JSON string (escapes
// undone); a value that is not a string, or none, is "".
func tierMember(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var tier string
	if json.Unmarshal(raw, &tier) != nil {
		return ""
	}
	return tier
}
