package run

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/trace"
)

// pausingSink writes spans to a store, holding the first run span that
// carries a request.refused event (Manager.Note's) until release is
// closed: the goroutine that took the snapshot is preempted between the
// snapshot and the hand-over, as the scheduler may do.
type pausingSink struct {
	st      *memstore.Store
	paused  chan struct{}
	release chan struct{}
	held    bool
}

func (s *pausingSink) Record(sp trace.Span) {
	if sp.Kind == trace.KindRun && !s.held && slices.ContainsFunc(sp.Events, func(e trace.Event) bool { return e.Name == "request.refused" }) {
		s.held = true
		close(s.paused)
		<-s.release
	}
	_ = s.st.WriteSpans(context.Background(), []trace.Span{sp})
}

// TestRunSpanRecordsKeepTheirOrder: a note's snapshot of a live run, held
// before it reaches the sink while the run ends, must not replace the
// ended run's span (the store keeps a span's last write). Found by an
// adversarial review: the stored span said the run never ended.
func TestRunSpanRecordsKeepTheirOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New()
		sink := &pausingSink{st: st, paused: make(chan struct{}), release: make(chan struct{})}
		m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: sink, KillPoll: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		r, err := m.Start(ctx, Spec{ID: "noted"})
		if err != nil {
			t.Fatal(err)
		}
		noted := make(chan bool)
		go func() {
			noted <- m.Note("noted", r.Tenant(), "request.refused", map[string]any{"reason": "invalid_request"})
		}()
		<-sink.paused // the note's snapshot is taken, not yet handed over
		finished := make(chan error)
		go func() { finished <- r.Finish(ctx, store.RunSucceeded, nil) }()
		synctest.Wait() // Finish has ended, or waits for the note's hand-over
		close(sink.release)
		if !<-noted {
			t.Fatal("Note did not note")
		}
		if err := <-finished; err != nil {
			t.Fatal(err)
		}
		spans, err := st.RunSpans(ctx, "noted")
		if err != nil {
			t.Fatal(err)
		}
		var run *trace.Span
		for i := range spans {
			if spans[i].Kind == trace.KindRun {
				run = &spans[i]
			}
		}
		switch {
		case run == nil:
			t.Fatalf("no run span stored: %+v", spans)
		case run.Status != trace.StatusOK || run.End.IsZero() || run.Attrs[trace.AttrRunStatus] != string(store.RunSucceeded):
			t.Errorf("stored run span: status %q, end %v, %s %v; want the ended run's (ok, an end, succeeded)",
				run.Status, run.End, trace.AttrRunStatus, run.Attrs[trace.AttrRunStatus])
		case !slices.ContainsFunc(run.Events, func(e trace.Event) bool { return e.Name == "request.refused" }):
			t.Errorf("the ended run span lost the note's event: %+v", run.Events)
		}
	})
}

// TestRunEventsBoundedPerName: a run noted more than maxEventsPerName
// times under one name keeps the first maxEventsPerName of them, counts
// the rest on its span, and still takes events of other names (a kill).
func TestRunEventsBoundedPerName(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	m, err := NewManager(Config{Store: st, Pricing: testPricing(t), Sink: storeSink{st}, KillPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	r, err := m.Start(ctx, Spec{ID: "flooded"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxEventsPerName + 50 {
		if !m.Note("flooded", r.Tenant(), "request.refused", map[string]any{"n": int64(i)}) {
			t.Fatal("Note did not note")
		}
	}
	m.Note("flooded", r.Tenant(), "belay.kill", nil)
	spans, err := st.RunSpans(ctx, "flooded")
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 1 {
		t.Fatalf("spans = %+v, want the run's", spans)
	}
	sp := spans[0]
	refused := 0
	for _, e := range sp.Events {
		if e.Name == "request.refused" {
			refused++
		}
	}
	last := sp.Events[len(sp.Events)-1]
	if refused != maxEventsPerName || last.Name != "belay.kill" || sp.Events[maxEventsPerName-1].Attrs["n"] != int64(maxEventsPerName-1) {
		t.Errorf("events: %d request.refused (want %d, the first ones), last %q (want belay.kill)", refused, maxEventsPerName, last.Name)
	}
	if got := sp.Attrs["belay.run.events_dropped"]; got != int64(50) {
		t.Errorf("belay.run.events_dropped = %v, want 50", got)
	}
}
