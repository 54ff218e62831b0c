package dialect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrNotObject is returned by RewriteModel for a body that is not one JSON
// object.
var ErrNotObject = errors.New("dialect: request body is not a JSON object")

// RewriteModel returns body with the value of its top-level "model" member
// replaced by the JSON string model. Every other byte is kept as it was:
// member order, whitespace, unknown fields and number spellings survive, so
// a gateway forwards what the client sent except the model. Nested "model"
// keys (inside messages or tools) are not touched. When the key appears more
// than once every occurrence is replaced; when it is absent, it is inserted
// as the first member.
//
// It returns ErrNotObject (wrapped with detail) when body is not a single
// valid JSON object. It does not modify body.
func RewriteModel(body []byte, model string) ([]byte, error) {
	spans, open, err := topLevelValueSpans(body, "model")
	if err != nil {
		return nil, err
	}
	quoted, err := json.Marshal(model)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(quoted))
	if len(spans) == 0 {
		out = append(out, body[:open+1]...)
		out = append(out, `"model":`...)
		out = append(out, quoted...)
		if !emptyObject(body[open+1:]) {
			out = append(out, ',')
		}
		return append(out, body[open+1:]...), nil
	}
	prev := 0
	for _, s := range spans {
		out = append(out, body[prev:s[0]]...)
		out = append(out, quoted...)
		prev = s[1]
	}
	return append(out, body[prev:]...), nil
}

func emptyObject(rest []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(rest, " \t\r\n"), []byte("}"))
}

// topLevelValueSpans returns the [start, end) byte spans of the values of
// every top-level member named key, and the offset of the opening brace.
func topLevelValueSpans(body []byte, key string) (spans [][2]int, open int, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, 0, fmt.Errorf("%w: %v", ErrNotObject, describe(tok, err))
	}
	open = int(dec.InputOffset()) - 1
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrNotObject, err)
		}
		afterKey := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrNotObject, err)
		}
		if k == key {
			end := int(dec.InputOffset())
			start := afterKey
			for start < end && (body[start] == ':' || isSpace(body[start])) {
				start++
			}
			spans = append(spans, [2]int{start, end})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrNotObject, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, 0, fmt.Errorf("%w: trailing data after the object", ErrNotObject)
	}
	return spans, open, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func describe(tok json.Token, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("starts with %v", tok)
}

// DecodeObject decodes a request body into v, which must point to a
// struct: a body that is not one JSON object (null, an array, a string, a
// number) is a *FieldError on "body" ("must be a JSON object"), and decode
// errors are turned into a *FieldError by DecodeError.
func DecodeObject(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
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
