package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/belay-run/belay/internal/fastjson"
)

// EachMember calls fn for each top-level member of the JSON object body, in
// order, duplicates included: name is the member's name with its escapes
// decoded, value the member's value exactly as sent, without the
// whitespace around it. Both may share memory with body and are valid only
// during the call. Nested members are not visited.
//
// It reads what json.Unmarshal into a map[string]json.RawMessage reads,
// without building the map or decoding the values (the map keeps the last
// of repeated names): the body is checked with json.Valid, so what
// encoding/json rejects is rejected here, and then only the top level is
// scanned. It returns ErrNotObject (wrapped with detail), without calling
// fn, when body is not one valid JSON object (null included); whitespace
// around the object is allowed. It does not modify body and is safe for
// concurrent use.
func EachMember(body []byte, fn func(name, value []byte)) error {
	_, err := scanMembers(body, false, func(name []byte, _, _, start, end int) { fn(name, body[start:end]) })
	return err
}

// EachMemberOfValid is EachMember for body already known to be valid JSON
// (a value EachMember passed to fn, say): the validity check is skipped.
// Passed JSON that is not valid, it may panic or misreport.
func EachMemberOfValid(body []byte, fn func(name, value []byte)) error {
	_, err := scanMembers(body, true, func(name []byte, _, _, start, end int) { fn(name, body[start:end]) })
	return err
}

// EachElementOfValid calls fn for each element of the JSON array array, in
// order: value is the element exactly as sent, without the whitespace
// around it, and shares memory with array. Elements are not decoded and
// nested arrays are not entered. It returns ErrNotArray, without calling
// fn, when array is not an array (null included); the error is not
// wrapped, so that telling a string from an array costs no allocation.
//
// array must be valid JSON (a value EachMember passed to fn, say): the
// validity check is skipped, and passed JSON that is not valid, it may
// panic or misreport. It does not modify array.
func EachElementOfValid(array []byte, fn func(value []byte)) error {
	i := skipSpace(array, 0)
	if i == len(array) || array[i] != '[' {
		return ErrNotArray
	}
	for i = skipSpace(array, i+1); array[i] != ']'; {
		end := skipValue(array, i)
		fn(array[i:end])
		i = skipSpace(array, end)
		if array[i] == ',' {
			i = skipSpace(array, i+1)
		}
	}
	return nil
}

// DecodeMember decodes the value of every top-level member of the JSON
// object body whose name equals name under Unicode case folding (as
// encoding/json matches a struct field), in order, into v. It leaves in v
// what json.Unmarshal of body into a struct whose only field is tagged name
// would leave in that field: with duplicates, a later value overwrites or
// (into a pointer to a struct) merges into an earlier one; without a match,
// v is untouched.
//
// It returns ErrNotObject (wrapped with detail) when body is not one valid
// JSON object, and otherwise the first error json.Unmarshal returned for a
// matching value (a *json.UnmarshalTypeError), after decoding them all.
func DecodeMember(body []byte, name string, v any) error {
	want := []byte(name)
	var first error
	err := EachMember(body, func(n, value []byte) {
		if !bytes.EqualFold(n, want) {
			return
		}
		if err := fastjson.Unmarshal(value, v); err != nil && first == nil {
			first = err
		}
	})
	if err != nil {
		return err
	}
	return first
}

// scanMembers calls fn for each top-level member of the JSON object body
// with its name (escapes decoded), the [nameStart, nameEnd) byte offsets of
// the quoted name and the [start, end) byte offsets of its value, and returns the offset of the opening brace. It checks body with
// json.Valid first (unless valid says the caller has: json.Unmarshal
// accepted it), so the scan itself only has to find where each value
// ends: strings are skipped to their unescaped closing quote, arrays and
// objects to the bracket that closes their depth.
func scanMembers(body []byte, valid bool, fn func(name []byte, nameStart, nameEnd, start, end int)) (open int, err error) {
	if !valid && !fastjson.Valid(body) {
		var v json.RawMessage
		return 0, fmt.Errorf("%w: %v", ErrNotObject, json.Unmarshal(body, &v))
	}
	open = skipSpace(body, 0)
	if open == len(body) {
		return 0, fmt.Errorf("%w: empty", ErrNotObject)
	}
	if body[open] != '{' {
		return 0, fmt.Errorf("%w: starts with %c", ErrNotObject, body[open])
	}
	i := skipSpace(body, open+1)
	for body[i] == '"' {
		nameEnd := skipString(body, i)
		name := memberName(body[i:nameEnd])
		start := skipSpace(body, skipSpace(body, nameEnd)+1) // past the colon
		end := skipValue(body, start)
		fn(name, i, nameEnd, start, end)
		i = skipSpace(body, end)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return open, nil
}

// memberName returns the name of a quoted member name: the bytes between
// the quotes, or, when they hold an escape or invalid UTF-8, the string
// encoding/json decodes (invalid bytes become U+FFFD).
func memberName(quoted []byte) []byte {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return raw
	}
	var s string
	_ = json.Unmarshal(quoted, &s) // valid: checked by scanMembers
	return []byte(s)
}

// skipSpace returns the offset of the first non-whitespace byte of b at or
// after i (len(b) if there is none).
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the offset just past the JSON value that starts at
// b[i]; b must be valid JSON.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	}
	for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' { // a number or a literal
		i++
	}
	return i
}

// skipString returns the offset just past the string whose opening quote
// is b[i]: the first quote preceded by an even number of backslashes.
func skipString(b []byte, i int) int {
	for i++; ; i++ {
		// Most strings of a request's structure (names, types, ids) are
		// short: a byte loop finds their end sooner than a call of
		// bytes.IndexByte, which is kept for the long ones.
		short := min(i+16, len(b))
		for i < short && b[i] != '"' {
			i++
		}
		if i == short {
			q := bytes.IndexByte(b[i:], '"')
			if q < 0 { // not valid JSON
				return len(b)
			}
			i += q
		}
		backslashes := 0
		for b[i-1-backslashes] == '\\' { // stops at the opening quote at the latest
			backslashes++
		}
		if backslashes%2 == 0 {
			return i + 1
		}
	}
}

// skipNested returns the offset just past the array or object that opens
// at b[i], counting brackets outside strings.
func skipNested(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return i
}
