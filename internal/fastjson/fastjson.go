// Package fastjson decodes JSON with segmentio/encoding/json, which gives
// encoding/json's results (its types and error types are
// encoding/json's) in less time, and lets encoding/json decide a document
// it refuses, so that errors read as encoding/json words them.
package fastjson

import (
	"encoding/json"

	segjson "github.com/segmentio/encoding/json"
)

// Unmarshal is json.Unmarshal: on success v holds what encoding/json
// would decode; on failure the error is encoding/json's (and v may hold
// part of the document). Safe for concurrent use.
func Unmarshal(data []byte, v any) error {
	if segjson.Unmarshal(data, v) == nil {
		return nil
	}
	return json.Unmarshal(data, v)
}
