package dialect

import "fmt"

// CheckContent checks a message content value c (valid JSON, as decoded
// into a json.RawMessage) against the shape both OpenAI's Chat Completions
// and Anthropic's Messages APIs accept: a string, or an array of objects
// each with a string "type", a "text" part's (block's) "text" a string.
// null is accepted when nullOK (an OpenAI assistant message with only tool
// calls; an absent content is empty c). A problem is a *FieldError whose
// Field is the path below the content ("" for the content itself, then its
// parts indexed as sep says: "[%d]" gives OpenAI's "[1].text", ".%d"
// Anthropic's ".1.text"), for the caller to prefix with the content's own
// path; nothing is allocated when c is valid.
//
// Other part types are not checked further: what an image or a document
// needs is the provider's to say, and it answers a 400 that belay relays.
func CheckContent(c []byte, sep string, nullOK bool) *FieldError {
	i := skipSpace(c, 0)
	if i == len(c) {
		return nil
	}
	switch c[i] {
	case '"':
		return nil
	case 'n':
		if nullOK {
			return nil
		}
		return Field("", "must be a string or an array of content parts, not null")
	case '[':
	default:
		return Field("", "must be a string or an array of content parts, not %s", kindOf(c[i]))
	}
	n := 0
	var bad *FieldError
	_ = EachElementOfValid(c[i:], func(part []byte) {
		if bad == nil {
			if bad = checkPart(part); bad != nil {
				bad.Field = fmt.Sprintf(sep, n) + bad.Field
			}
		}
		n++
	})
	return bad
}

// checkPart checks one content part (valid JSON, no space around it); a
// problem's Field is the path below the part.
func checkPart(part []byte) *FieldError {
	if part[0] != '{' {
		return Field("", "must be an object, not %s", kindOf(part[0]))
	}
	var typ, text []byte
	_ = EachMemberOfValid(part, func(name, value []byte) {
		switch string(name) {
		case "type":
			typ = value
		case "text":
			text = value
		}
	})
	switch {
	case typ == nil:
		return Field(".type", "is required")
	case typ[0] != '"':
		return Field(".type", "must be a string, not %s", kindOf(typ[0]))
	case string(typ) == `"text"` && text == nil:
		return Field(".text", "is required for a text part")
	case string(typ) == `"text"` && text[0] != '"':
		return Field(".text", "must be a string, not %s", kindOf(text[0]))
	}
	return nil
}

// kindOf names the JSON type of the value starting with c, as
// encoding/json's UnmarshalTypeError.Value does.
func kindOf(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}
