package storetest

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

func sameSpans(t *testing.T, got, want []trace.Span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d spans, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Start.Equal(w.Start) || !g.End.Equal(w.End) {
			t.Errorf("span %s times: got %v..%v, want %v..%v", w.SpanID, g.Start, g.End, w.Start, w.End)
		}
		g.Start, g.End, w.Start, w.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if len(g.Events) != len(w.Events) {
			t.Errorf("span %s: %d events, want %d", w.SpanID, len(g.Events), len(w.Events))
			continue
		}
		for j := range w.Events {
			if !g.Events[j].Time.Equal(w.Events[j].Time) {
				t.Errorf("span %s event %d time %v, want %v", w.SpanID, j, g.Events[j].Time, w.Events[j].Time)
			}
		}
		ge, we := stripTimes(g.Events), stripTimes(w.Events)
		g.Events, w.Events = nil, nil
		if !reflect.DeepEqual(g, w) || !reflect.DeepEqual(ge, we) {
			t.Errorf("span %s:\n got %#v %#v\nwant %#v %#v", w.SpanID, g, ge, w, we)
		}
	}
}

func stripTimes(ev []trace.Event) []trace.Event {
	out := make([]trace.Event, len(ev))
	for i, e := range ev {
		e.Time = time.Time{}
		out[i] = e
	}
	return out
}

func span(run, id, parent string, start time.Duration) trace.Span {
	return trace.Span{
		TraceID: "trace-" + run, SpanID: id, ParentID: parent, RunID: run, Kind: trace.KindModel,
		Name: "chat gpt-4o", Start: at(start), End: at(start + 1500*time.Millisecond), Status: trace.StatusOK,
		Attrs: map[string]any{trace.AttrRequestModel: "gpt-4o", trace.AttrInputTokens: int64(1200)},
	}
}

func testSpans(t *testing.T, s store.Store) {
	ctx := context.Background()
	root := span("r1", "s-root", "", 0)
	root.Kind, root.Name = trace.KindRun, "invoke_agent support"
	root.Events = []trace.Event{
		{Name: "belay.breaker", Time: at(time.Second), Attrs: map[string]any{"belay.breaker.state": "open", "n": int64(5)}},
		{Name: "belay.kill", Time: at(2 * time.Second)},
	}
	b := span("r1", "s-b", "s-root", 2*time.Second)
	a := span("r1", "s-a", "s-root", 2*time.Second) // same start: span id orders
	c := span("r1", "s-c", "s-root", time.Second)
	other := span("r2", "s-other", "", 0)
	must(t, s.WriteSpans(ctx, []trace.Span{b, root, a, other, c}))

	got, err := s.RunSpans(ctx, "r1")
	must(t, err)
	sameSpans(t, got, []trace.Span{root, c, a, b})

	// A span written at start and again at end: the second write replaces it.
	b.End, b.Status = at(9*time.Second), trace.StatusError
	b.Attrs = map[string]any{trace.AttrErrorType: "rate_limited"}
	b.Events = []trace.Event{{Name: "retry", Time: at(3 * time.Second)}}
	must(t, s.WriteSpans(ctx, []trace.Span{b}))
	got, err = s.RunSpans(ctx, "r1")
	must(t, err)
	sameSpans(t, got, []trace.Span{root, c, a, b})

	// A span written twice in one batch ends as its later write, also
	// when the two land in one multi-row statement.
	d1, d2 := span("r4", "s-d", "", time.Second), span("r4", "s-e", "", 2*time.Second)
	d1again := d1
	d1again.End, d1again.Status, d1again.Name = at(5*time.Second), trace.StatusError, "chat again"
	must(t, s.WriteSpans(ctx, []trace.Span{d1, d2, d1again}))
	got, err = s.RunSpans(ctx, "r4")
	must(t, err)
	sameSpans(t, got, []trace.Span{d1again, d2})

	if got, err := s.RunSpans(ctx, "absent"); err != nil || len(got) != 0 {
		t.Errorf("RunSpans of an unknown run = %v, %v; want none, nil", got, err)
	}
	must(t, s.WriteSpans(ctx, nil))

	// A batch is one transaction: one bad span (an unencodable attribute)
	// writes none of it.
	bad := span("r3", "s-bad", "", 0)
	bad.Attrs = map[string]any{"ch": make(chan int)}
	if err := s.WriteSpans(ctx, []trace.Span{span("r3", "s-good", "", 0), bad}); err == nil {
		t.Error("WriteSpans with an unencodable attribute: nil error")
	}
	if got, _ := s.RunSpans(ctx, "r3"); len(got) != 0 {
		t.Errorf("a failed batch left %d spans", len(got))
	}

	// A large batch (the benchmark measures its speed).
	batch := make([]trace.Span, 1000)
	for i := range batch {
		batch[i] = span("big", fmt.Sprintf("big-%04d", i), "", time.Duration(i)*time.Millisecond)
	}
	must(t, s.WriteSpans(ctx, batch))
	got, err = s.RunSpans(ctx, "big")
	must(t, err)
	sameSpans(t, got, batch)
}

// testSpanAttrs checks the attribute round-trip rule of the SQL backends.
func testSpanAttrs(t *testing.T, s store.Store) {
	ctx := context.Background()
	in := map[string]any{
		"str": "x", "empty": "", "t": true, "f": false,
		"i64": int64(-42), "int": 7, "u8": uint8(200), "big": int64(math.MaxInt64),
		"f64": 0.1, "whole": 3.0, "f32": float32(0.5), "tiny": 1e-300, "huge": 1e300,
		"nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1),
		"strs": []string{"stop", "length"}, "no_strs": []string{},
		"ints": []int64{1, 2}, "floats": []float64{1, 2.5}, "bools": []any{true, false},
		"mixed": []any{"a", int64(1)},
		"obj":   map[string]any{"k": 2.0, "n": int64(3)},
	}
	want := map[string]any{
		"str": "x", "empty": "", "t": true, "f": false,
		"i64": int64(-42), "int": int64(7), "u8": int64(200), "big": int64(math.MaxInt64),
		"f64": 0.1, "whole": 3.0, "f32": 0.5, "tiny": 1e-300, "huge": 1e300,
		"nan": "NaN", "inf": "+Inf", "ninf": "-Inf",
		"strs": []string{"stop", "length"}, "no_strs": []string{},
		"ints": []int64{1, 2}, "floats": []float64{1, 2.5}, "bools": []bool{true, false},
		"mixed": []any{"a", int64(1)},
		"obj":   map[string]any{"k": 2.0, "n": int64(3)},
	}
	sp := span("attrs", "s1", "", 0)
	sp.Attrs = in
	sp.Events = []trace.Event{{Name: "e", Time: at(time.Second), Attrs: map[string]any{"whole": 1.0, "n": int64(1)}}}
	empty := span("attrs", "s2", "", time.Second)
	empty.Attrs = map[string]any{}
	must(t, s.WriteSpans(ctx, []trace.Span{sp, empty}))
	got, err := s.RunSpans(ctx, "attrs")
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("got %d spans, want 2", len(got))
	}
	for k, w := range want {
		if g := got[0].Attrs[k]; !reflect.DeepEqual(g, w) {
			t.Errorf("attr %q: got %#v (%T), want %#v (%T)", k, g, g, w, w)
		}
	}
	if len(got[0].Attrs) != len(want) {
		t.Errorf("got %d attrs, want %d", len(got[0].Attrs), len(want))
	}
	if ev := got[0].Events[0].Attrs; !reflect.DeepEqual(ev, map[string]any{"whole": 1.0, "n": int64(1)}) {
		t.Errorf("event attrs: got %#v", ev)
	}
	if got[1].Attrs != nil {
		t.Errorf("empty attrs came back %#v, want nil", got[1].Attrs)
	}
}
