package openai

import (
	"bytes"

	"github.com/belay-run/belay/dialect"
)

// ResponseUsage returns the top-level "usage" member of a chat completion
// body as json.Unmarshal of the body into a struct with a *Usage field
// "usage" leaves it: ok is false when the body is not one JSON object, has
// no usage or a null one, or a usage that does not decode (a count that
// is not an integer, say). The usual body (one usage object, its counts
// integers, its names as OpenAI spells them) is read without reflection;
// anything else is decoded by encoding/json. Safe for concurrent use.
func ResponseUsage(body []byte) (u Usage, ok bool) {
	return responseUsage(body, dialect.EachMember)
}

// ResponseUsageOfValid is ResponseUsage for a body already known to be
// valid JSON (checked with dialect.EachMember, say): the validity check is
// not repeated. Passed JSON that is not valid, it may misreport.
func ResponseUsageOfValid(body []byte) (u Usage, ok bool) {
	return responseUsage(body, dialect.EachMemberOfValid)
}

func responseUsage(body []byte, each func([]byte, func(name, value []byte)) error) (u Usage, ok bool) {
	if u, ok, sure := usageQuick(body, each); sure {
		return u, ok
	}
	var p *Usage
	if dialect.DecodeMember(body, "usage", &p) != nil || p == nil {
		return Usage{}, false
	}
	return *p, true
}

// usageQuick is ResponseUsage without reflection; sure is false when the
// body is not the usual one and encoding/json must decide.
func usageQuick(body []byte, each func([]byte, func(name, value []byte)) error) (u Usage, ok, sure bool) {
	var val []byte
	n, odd := 0, false
	if err := each(body, func(name, value []byte) {
		if bytes.EqualFold(name, []byte("usage")) {
			n, odd, val = n+1, odd || string(name) != "usage", value
		}
	}); err != nil {
		return Usage{}, false, true // not a JSON object
	}
	switch {
	case n == 0:
		return Usage{}, false, true
	case n > 1 || odd:
		return Usage{}, false, false
	case string(val) == "null":
		return Usage{}, false, true
	case val[0] != '{':
		return Usage{}, false, true // a type error
	}
	sure = true
	_ = dialect.EachMemberOfValid(val, func(name, v []byte) {
		switch {
		case !sure:
		case string(name) == "prompt_tokens":
			sure = quickInt(&u.PromptTokens, v)
		case string(name) == "completion_tokens":
			sure = quickInt(&u.CompletionTokens, v)
		case string(name) == "total_tokens":
			sure = quickInt(&u.TotalTokens, v)
		case string(name) == "prompt_tokens_details":
			sure = quickObject(&u.PromptTokensDetails, v, func(d *PromptTokensDetails, name, v []byte) bool {
				switch string(name) {
				case "cached_tokens":
					return quickInt(&d.CachedTokens, v)
				case "audio_tokens":
					return quickInt(&d.AudioTokens, v)
				}
				return !foldsTo(name, "cached_tokens", "audio_tokens")
			})
		case string(name) == "completion_tokens_details":
			sure = quickObject(&u.CompletionTokensDetails, v, func(d *CompletionTokensDetails, name, v []byte) bool {
				switch string(name) {
				case "reasoning_tokens":
					return quickInt(&d.ReasoningTokens, v)
				case "audio_tokens":
					return quickInt(&d.AudioTokens, v)
				case "accepted_prediction_tokens":
					return quickInt(&d.AcceptedPredictionTokens, v)
				case "rejected_prediction_tokens":
					return quickInt(&d.RejectedPredictionTokens, v)
				}
				return !foldsTo(name, "reasoning_tokens", "audio_tokens", "accepted_prediction_tokens", "rejected_prediction_tokens")
			})
		default: // unknown names are ignored, as encoding/json does; known ones in other cases are not usual
			sure = !foldsTo(name, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details")
		}
	})
	return u, sure, sure
}

// quickInt sets *dst from v, a valid JSON value, as encoding/json would
// into an int64 when v is an integer literal that fits (null leaves dst
// as it is); it returns false for anything else.
func quickInt(dst *int64, v []byte) bool {
	if string(v) == "null" {
		return true
	}
	digits, neg := v, v[0] == '-'
	if neg {
		digits = v[1:]
	}
	if len(digits) == 0 || len(digits) > 18 { // 18 digits cannot overflow; longer: encoding/json decides
		return false
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' { // a fraction or an exponent, or not a number: encoding/json decides
			return false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

// quickObject decodes v, a valid JSON value, into *dst as encoding/json
// would into a pointer to a struct (null sets it to nil; an object is
// merged into the struct, allocated when nil), with member reading each
// member; it returns false when v is neither or member does.
func quickObject[T any](dst **T, v []byte, member func(d *T, name, v []byte) bool) bool {
	switch {
	case string(v) == "null":
		*dst = nil
		return true
	case v[0] != '{':
		return false
	}
	if *dst == nil {
		*dst = new(T)
	}
	ok := true
	_ = dialect.EachMemberOfValid(v, func(name, v []byte) { ok = ok && member(*dst, name, v) })
	return ok
}

// foldsTo reports whether name equals one of names under Unicode case
// folding (as encoding/json matches a field).
func foldsTo(name []byte, names ...string) bool {
	for _, n := range names {
		if bytes.EqualFold(name, []byte(n)) {
			return true
		}
	}
	return false
}
