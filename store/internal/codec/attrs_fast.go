package codec

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The fast path of EncodeAttrs: maps whose values are all of the common
// span attribute types are written straight into a pooled byte buffer, with
// no copy of the map and no reflection. The text may differ byte for byte
// from what encoding/json writes (no HTML escaping, no escaping of U+2028
// and U+2029), but DecodeAttrs reads back exactly the same values. A map
// holding any other value type, or a key or string that is not valid UTF-8
// (encoding/json replaces invalid bytes with U+FFFD), takes the
// encoding/json path instead.

// attrsScratch is the reusable state of one fast-path encoding.
type attrsScratch struct {
	buf  []byte
	keys []string
}

// Scratch buffers that grew past these sizes (a huge payload attribute) are
// dropped rather than pooled, so one outlier does not pin memory.
const (
	maxPooledBuf  = 64 << 10
	maxPooledKeys = 1024
)

var attrsPool = sync.Pool{New: func() any { return new(attrsScratch) }}

// encodeAttrsFast returns the JSON text of a non-empty attrs, or ok false
// when attrs holds a value or text it does not handle.
func encodeAttrsFast(attrs map[string]any) (s string, ok bool) {
	sc := attrsPool.Get().(*attrsScratch)
	keys := sc.keys[:0]
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys) // as encoding/json orders map keys
	b, ok := appendObject(sc.buf[:0], keys, attrs)
	if ok {
		s = string(b)
	}
	if cap(b) <= maxPooledBuf {
		sc.buf = b[:0]
	} else {
		sc.buf = nil
	}
	clear(keys) // do not keep the caller's strings alive from the pool
	if cap(keys) <= maxPooledKeys {
		sc.keys = keys[:0]
	} else {
		sc.keys = nil
	}
	attrsPool.Put(sc)
	return s, ok
}

// appendObject appends attrs to b as a JSON object, its members in the
// order of keys.
func appendObject(b []byte, keys []string, attrs map[string]any) ([]byte, bool) {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendString(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendValue(b, attrs[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendValue appends v as prepare and encoding/json together would write
// it, or reports ok false for a type it does not handle. Only the exact
// (unnamed) types are handled: a named type may have its own MarshalJSON.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x), true
	case int:
		return strconv.AppendInt(b, int64(x), 10), true
	case int8:
		return strconv.AppendInt(b, int64(x), 10), true
	case int16:
		return strconv.AppendInt(b, int64(x), 10), true
	case int32:
		return strconv.AppendInt(b, int64(x), 10), true
	case int64:
		return strconv.AppendInt(b, x, 10), true
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), true
	case uint64:
		return strconv.AppendUint(b, x, 10), true
	case float64:
		return appendFloat(b, x), true
	case float32:
		return appendFloat(b, float64(x)), true
	case []string:
		if x == nil {
			return append(b, "null"...), true // as encoding/json writes a nil slice
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendString(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case []int64:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, e, 10)
		}
		return append(b, ']'), true
	case []bool:
		if x == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(b, e)
		}
		return append(b, ']'), true
	case []float64:
		// prepare turns float slices, nil or not, into a non-nil []any, so
		// a nil []float64 is written as [] (not null).
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFloat(b, e)
		}
		return append(b, ']'), true
	case []float32:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendFloat(b, float64(e))
		}
		return append(b, ']'), true
	}
	return b, false
}

// appendFloat appends f as floatValue formats it: the shortest 'g' form of
// the float64, with ".0" added to an integral value so that it decodes as a
// float64; NaN, +Inf and -Inf as the strings "NaN", "+Inf", "-Inf". (A
// float32 is widened first, as prepare does, so it decodes to the same
// float64.)
func appendFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	for _, c := range b[n:] {
		if c == '.' || c == 'e' || c == 'E' {
			return b
		}
	}
	return append(b, ".0"...)
}

const hexDigits = "0123456789abcdef"

// mustEscape marks the bytes appendString escapes: '"', '\\' and the
// control characters below 0x20.
var mustEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendString appends s as a JSON string, or reports ok false when s is
// not valid UTF-8. Only '"', '\\' and control characters are escaped.
func appendString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !mustEscape[c] {
			continue // includes every byte of a multi-byte UTF-8 sequence
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
