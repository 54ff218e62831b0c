// Package fastjson decodes and checks JSON with segmentio/encoding/json,
// which gives encoding/json's results (its types and error types are
// encoding/json's) in less time. encoding/json decides a document that
// segmentio refuses, so that errors read as encoding/json words them, and
// one nested deeper than encoding/json allows (10000 levels), which
// segmentio does not limit.
package fastjson

import (
	"encoding/json"

	segjson "github.com/segmentio/encoding/json"
)

// maxDepth is encoding/json's nesting limit (encoding/json/scanner.go).
const maxDepth = 10000

// Unmarshal is json.Unmarshal: on success v holds what encoding/json
// would decode; on failure the error is encoding/json's (and v may hold
// part of the document). Safe for concurrent use.
func Unmarshal(data []byte, v any) error {
	if shallow(data) && segjson.Unmarshal(data, v) == nil {
		return nil
	}
	return json.Unmarshal(data, v)
}

// Valid is json.Valid. Safe for concurrent use.
func Valid(data []byte) bool {
	if !shallow(data) {
		return json.Valid(data)
	}
	return segjson.Valid(data)
}

// shallow reports whether data cannot nest deeper than maxDepth: it is too
// short to, or its brackets outside strings never open more than maxDepth
// at once (on malformed data the count may be off; the parsers refuse it).
func shallow(data []byte) bool {
	if len(data) <= maxDepth {
		return true
	}
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > maxDepth {
				return false
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return true
}
