package codec

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/trace"
)

// TestSpanBatchRoundTrip checks that every field of a span comes back
// from a batch: bytes that are not UTF-8 in its names, a start at the
// Unix epoch (not the zero time), a zero end, attributes and events under
// the attribute rule.
func TestSpanBatchRoundTrip(t *testing.T) {
	start := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	spans := []trace.Span{
		{SpanID: "s-root", TraceID: "t1", RunID: "r1", Kind: trace.KindRun, Name: "invoke_agent a\xffb \"q\"",
			Start: start, End: start.Add(1500 * time.Millisecond), Status: trace.StatusOK,
			Attrs:  map[string]any{trace.AttrRequestModel: "gpt-4o", trace.AttrInputTokens: int64(1200), "f": 3.0},
			Events: []trace.Event{{Name: "belay.breaker", Time: start.Add(time.Second), Attrs: map[string]any{"n": int64(5)}}}},
		{SpanID: "s-a", TraceID: "t1", ParentID: "s-root", RunID: "r1", Kind: trace.KindModel,
			Start: time.Unix(0, 0).UTC(), Status: trace.StatusUnset},
		{SpanID: "s-\x00", RunID: "r1"},
	}
	b, err := EncodeSpanBatch([]byte("prefix"), spans)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "prefix") {
		t.Fatalf("EncodeSpanBatch did not append to its buffer: %q", b[:10])
	}
	got, err := DecodeSpanBatch("r1", b[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, spans) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, spans)
	}
	if !got[1].End.IsZero() || got[1].Start.IsZero() || got[1].Start.UnixNano() != 0 {
		t.Errorf("s-a times = %v..%v, want the epoch..zero", got[1].Start, got[1].End)
	}
}

// TestSpanBatchDamaged checks that a batch cut anywhere, or with bytes
// after its last span, or of another format, is an error, never fewer
// spans than were written.
func TestSpanBatchDamaged(t *testing.T) {
	spans := []trace.Span{
		{SpanID: "s1", TraceID: "t", Name: "chat", Start: time.Unix(5, 0), Attrs: map[string]any{"k": "v"}},
		{SpanID: "s2", TraceID: "t", Name: "execute_tool", End: time.Unix(9, 0)},
	}
	b, err := EncodeSpanBatch(nil, spans)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(b) {
		if got, err := DecodeSpanBatch("r", b[:n]); err == nil {
			t.Errorf("batch cut to %d of %d bytes decoded to %d spans, no error", n, len(b), len(got))
		}
	}
	if _, err := DecodeSpanBatch("r", append(b, 0)); err == nil {
		t.Error("a batch with a byte after its spans decoded without an error")
	}
	other := append([]byte{9}, b[1:]...)
	if _, err := DecodeSpanBatch("r", other); err == nil || !strings.Contains(err.Error(), "unknown format") {
		t.Errorf("a batch of format 9: %v; want an unknown-format error", err)
	}
}

// TestSpanBatchRefusesBadSpans checks that a span without an id or with an
// attribute that cannot be encoded fails the whole batch.
func TestSpanBatchRefusesBadSpans(t *testing.T) {
	if _, err := EncodeSpanBatch(nil, []trace.Span{{SpanID: "ok"}, {}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a span without an id: %v; want ErrInvalid", err)
	}
	bad := trace.Span{SpanID: "s", Attrs: map[string]any{"ch": make(chan int)}}
	if b, err := EncodeSpanBatch(nil, []trace.Span{bad}); err == nil {
		t.Errorf("an unencodable attribute: %d bytes, no error", len(b))
	}
}
