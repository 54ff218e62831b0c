package codec

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/belay-run/belay/trace"
)

// spanBatchVersion is the first byte of every encoded span batch.
const spanBatchVersion = 1

// Presence bits of a span in a batch: which optional fields follow.
const (
	hasStart = 1 << iota
	hasEnd
	hasAttrs
	hasEvents
)

// errBatchTruncated is DecodeSpanBatch's error for a batch that ends
// before its last span does.
var errBatchTruncated = errors.New("span batch ends early")

// EncodeSpanBatch appends to b one run's spans as one value: a version
// byte, the number of spans (uvarint), then per span a presence byte, the span id, trace id, parent id,
// kind, name and status (each a uvarint length and its bytes, so any
// bytes round-trip), the start and end as varint Unix nanoseconds when
// set, and the attributes and events as EncodeAttrs and EncodeEvents
// write them (length-prefixed) when there are any. The spans' RunID is not
// written: the batch's row holds it. It fails, writing nothing, on a span
// without an id or with attributes or events that cannot be encoded.
func EncodeSpanBatch(b []byte, spans []trace.Span) ([]byte, error) {
	b = append(b, spanBatchVersion)
	b = binary.AppendUvarint(b, uint64(len(spans)))
	for i, s := range spans {
		if s.SpanID == "" {
			return nil, fmt.Errorf("%w: span %d has an empty span id", ErrInvalid, i)
		}
		attrs, err := EncodeAttrs(s.Attrs)
		if err != nil {
			return nil, fmt.Errorf("span %s: %w", s.SpanID, err)
		}
		events, err := EncodeEvents(s.Events)
		if err != nil {
			return nil, fmt.Errorf("span %s: %w", s.SpanID, err)
		}
		var flags byte
		if !s.Start.IsZero() {
			flags |= hasStart
		}
		if !s.End.IsZero() {
			flags |= hasEnd
		}
		if attrs != nil {
			flags |= hasAttrs
		}
		if events != nil {
			flags |= hasEvents
		}
		b = append(b, flags)
		for _, f := range [...]string{s.SpanID, s.TraceID, s.ParentID, string(s.Kind), s.Name, string(s.Status)} {
			b = appendBytes(b, f)
		}
		if flags&hasStart != 0 {
			b = binary.AppendVarint(b, s.Start.UnixNano())
		}
		if flags&hasEnd != 0 {
			b = binary.AppendVarint(b, s.End.UnixNano())
		}
		if attrs != nil {
			b = appendBytes(b, *attrs)
		}
		if events != nil {
			b = appendBytes(b, *events)
		}
	}
	return b, nil
}

func appendBytes(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// DecodeSpanBatch parses a value written by EncodeSpanBatch; every span
// gets runID. Times come back in UTC, attributes and events under the
// rule of DecodeAttrs and DecodeEvents.
func DecodeSpanBatch(runID string, b []byte) ([]trace.Span, error) {
	if len(b) == 0 || b[0] != spanBatchVersion {
		return nil, fmt.Errorf("span batch: unknown format (first byte %v, want %d)", b[:min(1, len(b))], spanBatchVersion)
	}
	d := batchReader{b: b[1:]}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) { // a span takes at least one byte
		return nil, fmt.Errorf("span batch: %w (no valid span count)", errBatchTruncated)
	}
	out := make([]trace.Span, 0, n)
	for range n {
		if len(d.b) == 0 {
			return nil, fmt.Errorf("span batch: %w: %d of %d spans", errBatchTruncated, len(out), n)
		}
		flags := d.b[0]
		d.b = d.b[1:]
		s := trace.Span{RunID: runID}
		s.SpanID, s.TraceID, s.ParentID = d.str(), d.str(), d.str()
		s.Kind, s.Name, s.Status = trace.SpanKind(d.str()), d.str(), trace.Status(d.str())
		if flags&hasStart != 0 {
			ns := d.varint()
			s.Start = Time(&ns)
		}
		if flags&hasEnd != 0 {
			ns := d.varint()
			s.End = Time(&ns)
		}
		var attrs, events *string
		if flags&hasAttrs != 0 {
			a := d.str()
			attrs = &a
		}
		if flags&hasEvents != 0 {
			e := d.str()
			events = &e
		}
		if d.err != nil {
			return nil, fmt.Errorf("span batch, span %d: %w", len(out), d.err)
		}
		var err error
		if s.Attrs, err = DecodeAttrs(attrs); err != nil {
			return nil, fmt.Errorf("span %s: %w", s.SpanID, err)
		}
		if s.Events, err = DecodeEvents(events); err != nil {
			return nil, fmt.Errorf("span %s: %w", s.SpanID, err)
		}
		out = append(out, s)
	}
	if len(d.b) > 0 {
		return nil, fmt.Errorf("span batch: %d bytes after its %d spans", len(d.b), n)
	}
	return out, nil
}

// batchReader reads the fields of an encoded batch; its first failure
// stays in err and later reads return zero values.
type batchReader struct {
	b   []byte
	err error
}

func (r *batchReader) str() string {
	n, k := binary.Uvarint(r.b)
	if r.err != nil || k <= 0 || n > uint64(len(r.b)-k) {
		r.err = errBatchTruncated
		return ""
	}
	s := string(r.b[k : k+int(n)])
	r.b = r.b[k+int(n):]
	return s
}

func (r *batchReader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if r.err != nil || k <= 0 {
		r.err = errBatchTruncated
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *batchReader) varint() int64 {
	v, k := binary.Varint(r.b)
	if r.err != nil || k <= 0 {
		r.err = errBatchTruncated
		return 0
	}
	r.b = r.b[k:]
	return v
}
