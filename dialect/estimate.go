package dialect

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// PromptSize adds up the parts of one request's prompt for a token
// estimate: characters of text (AddText) and of JSON counted as text
// (AddJSON), and tokens of media estimated by their own rules (AddMedia,
// with the constants and functions below). Tokens returns the sum.
//
// The dialects' prompt estimates walk the request body with
// EachMemberOfValid and EachElementOfValid and feed the values they find
// to a PromptSize; the values are not decoded. The zero value is empty and ready to use. A
// PromptSize is not safe for concurrent use.
type PromptSize struct {
	chars   int64        // characters of text and JSON
	media   int64        // tokens of images, audio and documents
	compact bytes.Buffer // scratch space for AddJSON
}

// AddText adds the length in bytes of the string the JSON string value
// decodes to (see StringLen); any other value (null, a number) adds
// nothing.
func (s *PromptSize) AddText(value []byte) { s.chars += int64(StringLen(value)) }

// AddJSON adds the length of the JSON value without its insignificant
// whitespace, so that a schema counts the same however the client
// formatted it; inside it, strings count as written, escapes included. A
// value that is a string counts as text (AddText), and null adds nothing.
// It is how a prompt part of a shape belay does not know is counted: by
// its size, never as zero. value must be valid JSON.
func (s *PromptSize) AddJSON(value []byte) {
	switch {
	case len(value) == 0 || string(value) == "null":
		return
	case value[0] == '"':
		s.AddText(value)
		return
	}
	n := len(value)
	s.compact.Reset()
	if json.Compact(&s.compact, value) == nil {
		n = s.compact.Len()
	}
	s.chars += int64(n)
}

// AddMedia adds tokens estimated for an image, an audio clip or a
// document (see OpenAIImageTokens, EstimateDocumentTokens, ...).
func (s *PromptSize) AddMedia(tokens int64) { s.media += tokens }

// Tokens returns the estimate: EstimateTokens of the characters added,
// plus the media tokens.
func (s *PromptSize) Tokens() int64 { return EstimateTokens(s.chars) + s.media }

// StringLen returns the length in bytes of the string the JSON string
// value decodes to, without decoding it: an escape counts as the bytes it
// stands for (\n one, \u00e9 two, a surrogate pair four, a lone surrogate
// the three of U+FFFD). A value that is not a string (null, a number, an
// object) gives 0. value must be valid JSON without whitespace around it
// (as EachMember passes it); invalid UTF-8 in it counts as its bytes
// (encoding/json decodes each invalid byte to U+FFFD).
func StringLen(value []byte) int {
	if len(value) < 2 || value[0] != '"' {
		return 0
	}
	s := value[1 : len(value)-1]
	n := len(s)
	for i := 0; ; {
		j := bytes.IndexByte(s[i:], '\\')
		if j < 0 {
			return n
		}
		i += j
		width, decoded := 2, 1 // \n, \", \\, ...: one byte
		if s[i+1] == 'u' {
			r := hex4(s[i+2 : i+6])
			width = 6
			if utf16.IsSurrogate(r) {
				r = utf8.RuneError // as encoding/json decodes a lone one
				if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
					if pair := utf16.DecodeRune(hex4(s[i+2:i+6]), hex4(s[i+8:i+12])); pair != utf8.RuneError {
						r, width = pair, 12
					}
				}
			}
			decoded = utf8.RuneLen(r)
		}
		n -= width - decoded
		i += width
	}
}

// hex4 returns the value of the four hex digits of a \u escape.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
