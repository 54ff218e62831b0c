package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/belay-run/belay/internal/fastjson"
)

// ErrNotObject is returned by RewriteModel, EachMember and DecodeMember for
// a body that is not one valid JSON object.
var ErrNotObject = errors.New("dialect: request body is not a JSON object")

// ErrNotArray is returned by EachElementOfValid for a value that is not a
// JSON array.
var ErrNotArray = errors.New("dialect: value is not a JSON array")

// RewriteModel returns body with the value of its top-level "model" member
// replaced by the JSON string model. Every other byte is kept as it was:
// member order, whitespace, unknown fields and number spellings survive, so
// a gateway forwards what the client sent except the model. Nested "model"
// keys (inside messages or tools) are not touched. Every top-level member
// whose name matches "model" under case folding ("Model" too, which
// encoding/json reads as the model) is replaced; when there is none,
// "model" is inserted as the first member.
//
// It returns ErrNotObject (wrapped with detail) when body is not a single
// valid JSON object. It does not modify body.
func RewriteModel(body []byte, model string) ([]byte, error) {
	return rewriteModel(body, model, false)
}

// RewriteModelValid is RewriteModel for a body the caller knows is valid
// JSON (json.Unmarshal accepted it, as the dialects' ParseRequest does): it
// does not check the whole body again. A body that is not a JSON object is
// still ErrNotObject; other invalid JSON gives an unspecified result.
func RewriteModelValid(body []byte, model string) ([]byte, error) {
	return rewriteModel(body, model, true)
}

func rewriteModel(body []byte, model string, valid bool) ([]byte, error) {
	var buf [64]byte
	return setMember(body, "model", appendString(buf[:0], model), valid)
}

// SetMemberValid returns body, which the caller knows is one valid JSON
// object (as RewriteModelValid), with the value of every top-level member
// named key (under case folding, as encoding/json reads it) replaced by
// value (JSON text), or, when there is none, with key: value inserted as the
// first member. Every other byte is kept.
func SetMemberValid(body []byte, key string, value []byte) ([]byte, error) {
	return setMember(body, key, value, true)
}

func setMember(body []byte, key string, value []byte, valid bool) ([]byte, error) {
	var spanBuf [2][4]int
	spans := spanBuf[:0]
	want := []byte(key)
	open, err := scanMembers(body, valid, func(name []byte, nameStart, nameEnd, start, end int) {
		// Under Unicode case folding, as encoding/json matches a member
		// to a struct field (the parser read "Model" as the model).
		if bytes.EqualFold(name, want) {
			spans = append(spans, [4]int{nameStart, nameEnd, start, end})
		}
	})
	if err != nil {
		return nil, err
	}
	var kbuf [32]byte
	quotedKey := appendString(kbuf[:0], key)
	out := make([]byte, 0, len(body)+len(quotedKey)+len(value)+1)
	if len(spans) == 0 {
		out = append(out, body[:open+1]...)
		out = append(out, quotedKey...)
		out = append(out, ':')
		out = append(out, value...)
		if !emptyObject(body[open+1:]) {
			out = append(out, ',')
		}
		return append(out, body[open+1:]...), nil
	}
	prev := 0
	for _, s := range spans {
		out = append(out, body[prev:s[0]]...)
		if string(body[s[0]:s[1]]) == string(quotedKey) {
			out = append(out, body[s[0]:s[1]]...)
		} else {
			// "Model", or an escaped spelling: written back as key, so
			// that a case-sensitive upstream reads it too.
			out = append(out, quotedKey...)
		}
		out = append(out, body[s[1]:s[2]]...) // the colon and its spaces
		out = append(out, value...)
		prev = s[3]
	}
	return append(out, body[prev:]...), nil
}

// appendString appends s to dst as a JSON string, as json.Marshal writes
// it: a string of printable ASCII without quotes, backslashes or HTML
// characters is copied between quotes, and any other goes through
// json.Marshal (escapes, \u003c for <, U+FFFD for invalid UTF-8).
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always marshals
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

func emptyObject(rest []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(rest, " \t\r\n"), []byte("}"))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// DecodeObject decodes a request body into v, which must point to a
// struct: a body that is not one JSON object (null, an array, a string, a
// number) is a *FieldError on "body" ("must be a JSON object"), and decode
// errors are turned into a *FieldError by DecodeError.
func DecodeObject(body []byte, v any) error {
	// fastjson: encoding/json's results and errors (DecodeError words
	// them), faster.
	if err := fastjson.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return Field("body", "must be a JSON object, not %s", te.Value)
		}
		return DecodeError(err)
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] != '{' { // null decodes into any struct
		return Field("body", "must be a JSON object, not null")
	}
	return nil
}

// DecodeError turns an error from encoding/json into a *FieldError naming
// the field: a type mismatch names its JSON path ("messages.content: must be
// string"), a syntax error names "body". Errors of other types are returned
// as a *FieldError on "body" with the error's text.
func DecodeError(err error) *FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return Field(field, "must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return Field("body", "is not valid JSON (at byte %d: %s)", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Field("body", "is empty or cut short")
	}
	return Field("body", "%s", err.Error())
}

func jsonKind(goKind string) string {
	switch {
	case goKind == "string":
		return "a string"
	case goKind == "bool":
		return "a boolean"
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "an integer"
	case strings.HasPrefix(goKind, "float"):
		return "a number"
	case goKind == "slice" || goKind == "array":
		return "an array"
	case goKind == "struct" || goKind == "map" || goKind == "ptr":
		return "an object"
	}
	return goKind
}
