package trace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// memWriter keeps every span written, and the size of each batch.
type memWriter struct {
	mu      sync.Mutex
	spans   []Span
	batches []int
	fail    int   // fail this many calls first
	err     error // the error to fail with
}

func (w *memWriter) WriteSpans(_ context.Context, spans []Span) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail > 0 {
		w.fail--
		return w.err
	}
	w.spans = append(w.spans, spans...)
	w.batches = append(w.batches, len(spans))
	return nil
}

func (w *memWriter) snapshot() ([]Span, []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Span(nil), w.spans...), append([]int(nil), w.batches...)
}

// gateWriter blocks every WriteSpans until the test sends on (or closes)
// release; entered receives each batch size as a write starts.
type gateWriter struct {
	entered chan int
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func newGateWriter() *gateWriter {
	return &gateWriter{entered: make(chan int, 1024), release: make(chan struct{})}
}

func (w *gateWriter) WriteSpans(ctx context.Context, spans []Span) error {
	select {
	case w.entered <- len(spans):
	default:
	}
	select {
	case <-w.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	w.n += len(spans)
	w.mu.Unlock()
	return nil
}

type sinkFunc func(Span)

func (f sinkFunc) Record(s Span) { f(s) }

func span(i int) Span {
	return Span{SpanID: fmt.Sprintf("%016x", i), Kind: KindTool, Name: "execute_tool t"}
}

func quietLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, nil))
}

func TestRecorderWritesInOrderAndFlushes(t *testing.T) {
	w := &memWriter{}
	var log bytes.Buffer
	r := NewRecorder(w, RecorderOptions{BatchSize: 64, Logger: quietLogger(&log)})
	for i := range 1000 {
		r.Record(span(i))
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	spans, batches := w.snapshot()
	if len(spans) != 1000 {
		t.Fatalf("written %d spans, want 1000", len(spans))
	}
	for i, s := range spans {
		if s.SpanID != span(i).SpanID {
			t.Fatalf("span %d is %s: order lost", i, s.SpanID)
		}
	}
	for _, b := range batches {
		if b > 64 {
			t.Errorf("batch of %d spans, BatchSize is 64", b)
		}
	}
	st := r.Stats()
	if st.Recorded != 1000 || st.Written != 1000 || st.Dropped != 0 || st.Queued != 0 {
		t.Errorf("Stats = %+v", st)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if log.Len() != 0 {
		t.Errorf("unexpected log: %s", log.String())
	}
}

func TestRecorderFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &memWriter{}
		r := NewRecorder(w, RecorderOptions{BatchSize: 10, FlushInterval: 100 * time.Millisecond})
		defer r.Close(context.Background())
		for i := range 3 {
			r.Record(span(i))
		}
		time.Sleep(99 * time.Millisecond)
		synctest.Wait()
		if spans, _ := w.snapshot(); len(spans) != 0 {
			t.Fatalf("a partial batch was written after 99ms: %d spans", len(spans))
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if spans, _ := w.snapshot(); len(spans) != 3 {
			t.Fatalf("after FlushInterval written %d spans, want 3", len(spans))
		}
	})
}

func TestRecorderBlocksThenDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newGateWriter()
		var drops []Drop
		var mu sync.Mutex
		var log bytes.Buffer
		r := NewRecorder(w, RecorderOptions{
			QueueSize: 4, BatchSize: 2, BlockTimeout: 5 * time.Millisecond, Logger: quietLogger(&log),
			OnDrop: func(d Drop) { mu.Lock(); drops = append(drops, d); mu.Unlock() },
		})
		for i := range 4 {
			r.Record(span(i))
		}
		if n := <-w.entered; n != 2 {
			t.Fatalf("first batch has %d spans, want 2", n)
		}
		// The queue holds 4 spans (2 being written): the 5th waits 5ms, then drops.
		start := time.Now()
		r.Record(span(4))
		if waited := time.Since(start); waited != 5*time.Millisecond {
			t.Errorf("Record waited %v on a full queue, want BlockTimeout 5ms", waited)
		}
		if st := r.Stats(); st.Dropped != 1 || st.Queued != 4 {
			t.Errorf("after the drop Stats = %+v", st)
		}
		mu.Lock()
		if len(drops) != 1 || drops[0].Reason != DropQueueFull || drops[0].Spans != 1 {
			t.Errorf("OnDrop got %+v", drops)
		}
		mu.Unlock()

		// A Record that finds room before its timeout is not dropped.
		done := make(chan time.Duration)
		go func() {
			start := time.Now()
			r.Record(span(5))
			done <- time.Since(start)
		}()
		synctest.Wait() // the goroutine is blocked on the full queue
		w.release <- struct{}{}
		if waited := <-done; waited != 0 {
			t.Errorf("Record waited %v; room was freed without time passing", waited)
		}
		close(w.release)
		if err := r.Close(context.Background()); !errors.Is(err, ErrDropped) {
			t.Errorf("Close = %v, want ErrDropped for the one drop", err)
		}
		st := r.Stats()
		if st.Recorded != 6 || st.Written != 5 || st.Dropped != 1 || st.MaxQueued != 4 {
			t.Errorf("final Stats = %+v", st)
		}
		if !strings.Contains(log.String(), "queue full") || !strings.Contains(log.String(), "spans=1") {
			t.Errorf("no queue-full log line: %q", log.String())
		}
	})
}

func TestRecorderDropWhenFullNeverBlocks(t *testing.T) {
	w := newGateWriter()
	var log bytes.Buffer
	r := NewRecorder(w, RecorderOptions{QueueSize: 8, BatchSize: 4, DropWhenFull: true, Logger: quietLogger(&log)})
	for i := range 100 {
		r.Record(span(i))
	}
	st := r.Stats()
	if st.Recorded != 100 || st.Dropped != 92 || st.Queued != 8 {
		t.Errorf("Stats = %+v, want 100 recorded, 92 dropped, 8 queued", st)
	}
	close(w.release)
	if err := r.Flush(t.Context()); !errors.Is(err, ErrDropped) || !strings.Contains(err.Error(), "92") {
		t.Errorf("Flush = %v, want ErrDropped naming 92", err)
	}
	if err := r.Flush(t.Context()); err != nil {
		t.Errorf("second Flush = %v, want nil (no drop since)", err)
	}
	if err := r.Close(t.Context()); err != nil {
		t.Errorf("Close = %v", err)
	}
	if st := r.Stats(); st.Written != 8 || st.Written+st.Dropped != st.Recorded {
		t.Errorf("final Stats = %+v", st)
	}
	if !strings.Contains(log.String(), "spans=92") {
		t.Errorf("log does not report the 92 drops: %q", log.String())
	}
}

// A burst of a million spans into a writer that is stuck: memory stays
// bounded by QueueSize and every span is accounted for.
func TestRecorderMillionSpanBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("burst test")
	}
	const total = 1_000_000
	w := newGateWriter()
	r := NewRecorder(w, RecorderOptions{DropWhenFull: true, Logger: quietLogger(new(bytes.Buffer))})
	s := span(1)
	s.Attrs = map[string]any{AttrToolName: "lookup"}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range total / 4 {
				r.Record(s)
			}
		})
	}
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 32<<20 {
		t.Errorf("heap grew %d MiB during the burst; the queue is not bounded", grew>>20)
	}
	st := r.Stats()
	if st.MaxQueued > 8192 || st.Queued != 8192 {
		t.Errorf("queue held %d (max %d), bound is 8192", st.Queued, st.MaxQueued)
	}
	close(w.release)
	if err := r.Close(t.Context()); !errors.Is(err, ErrDropped) {
		t.Errorf("Close = %v, want ErrDropped", err)
	}
	st = r.Stats()
	if st.Recorded != total || st.Written+st.Dropped != total || st.Written != 8192 {
		t.Errorf("Stats = %+v: recorded must equal written + dropped, written the queue", st)
	}
}

// Many goroutines into a writer that keeps up slowly, with flushes in the
// middle: nothing is lost or counted twice.
func TestRecorderConcurrentAccounting(t *testing.T) {
	w := &memWriter{}
	r := NewRecorder(w, RecorderOptions{QueueSize: 256, BatchSize: 32, Logger: quietLogger(new(bytes.Buffer))})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				r.Record(span(g*5000 + i))
				if i%1000 == 999 {
					_ = r.Flush(context.Background())
				}
			}
		})
	}
	wg.Wait()
	_ = r.Close(t.Context())
	st := r.Stats()
	spans, _ := w.snapshot()
	if st.Recorded != 40000 || st.Written+st.Dropped != st.Recorded || uint64(len(spans)) != st.Written || st.Queued != 0 {
		t.Errorf("Stats = %+v, writer got %d", st, len(spans))
	}
	seen := make(map[string]bool, len(spans))
	for _, s := range spans {
		if seen[s.SpanID] {
			t.Fatalf("span %s written twice", s.SpanID)
		}
		seen[s.SpanID] = true
	}
}

var errWrite = errors.New("disk full")

func TestRecorderRetriesThenDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &memWriter{fail: 100, err: errWrite}
		var log bytes.Buffer
		var drops []Drop
		r := NewRecorder(w, RecorderOptions{
			MaxRetries: 2, RetryBackoff: 50 * time.Millisecond, Logger: quietLogger(&log),
			OnDrop: func(d Drop) { drops = append(drops, d) }, // called on the writer goroutine only
		})
		defer r.Close(context.Background())
		for i := range 3 {
			r.Record(span(i))
		}
		start := time.Now()
		err := r.Flush(context.Background())
		if !errors.Is(err, ErrDropped) || !errors.Is(err, errWrite) {
			t.Fatalf("Flush = %v, want ErrDropped wrapping the write error", err)
		}
		if waited := time.Since(start); waited != 150*time.Millisecond {
			t.Errorf("retries took %v, want 50ms + 100ms backoff", waited)
		}
		st := r.Stats()
		if st.WriteErrors != 3 || st.Dropped != 3 || st.Written != 0 {
			t.Errorf("Stats = %+v, want 3 write errors and 3 spans dropped", st)
		}
		if len(drops) != 1 || drops[0].Reason != DropWriteFailed || drops[0].Spans != 3 || !errors.Is(drops[0].Err, errWrite) {
			t.Errorf("OnDrop got %+v", drops)
		}
		if !strings.Contains(log.String(), "write failed") || !strings.Contains(log.String(), "disk full") {
			t.Errorf("log = %q", log.String())
		}
	})
}

func TestRecorderRetrySucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &memWriter{fail: 2, err: errWrite}
		r := NewRecorder(w, RecorderOptions{})
		defer r.Close(context.Background())
		for i := range 3 {
			r.Record(span(i))
		}
		if err := r.Flush(context.Background()); err != nil {
			t.Fatalf("Flush = %v", err)
		}
		if st := r.Stats(); st.WriteErrors != 2 || st.Written != 3 || st.Dropped != 0 {
			t.Errorf("Stats = %+v", st)
		}
	})
}

func TestRecorderAfterClose(t *testing.T) {
	w := &memWriter{}
	var drops []Drop
	r := NewRecorder(w, RecorderOptions{OnDrop: func(d Drop) { drops = append(drops, d) }})
	r.Record(span(1))
	if err := r.Close(t.Context()); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if spans, _ := w.snapshot(); len(spans) != 1 {
		t.Errorf("Close wrote %d spans, want 1", len(spans))
	}
	r.Record(span(2))
	if len(drops) != 1 || drops[0].Reason != DropClosed || !errors.Is(drops[0].Err, ErrClosed) {
		t.Errorf("Record after Close: drops = %+v", drops)
	}
	if err := r.Flush(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close = %v", err)
	}
	if err := r.Close(t.Context()); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
	if st := r.Stats(); st.Recorded != 2 || st.Written != 1 || st.Dropped != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

func TestRecorderPayloadPolicyAndFanout(t *testing.T) {
	w := &memWriter{}
	var mu sync.Mutex
	var fanned []Span
	r := NewRecorder(w, RecorderOptions{
		Fanout: []Sink{sinkFunc(func(s Span) { mu.Lock(); fanned = append(fanned, s); mu.Unlock() })},
	})
	s := span(1)
	s.Attrs = map[string]any{AttrToolArguments: `{"to":"x@y.io"}`, AttrToolName: "send_email"}
	r.Record(s)
	if err := r.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans, _ := w.snapshot()
	mu.Lock()
	defer mu.Unlock()
	for name, got := range map[string][]Span{"writer": spans, "fanout": fanned} {
		if len(got) != 1 {
			t.Fatalf("%s got %d spans", name, len(got))
		}
		if _, ok := got[0].Attrs[AttrToolArguments]; ok || got[0].Attrs[AttrToolName] != "send_email" {
			t.Errorf("%s got attrs %v; capture off must remove the arguments only", name, got[0].Attrs)
		}
	}
}

type nopWriter struct{}

func (nopWriter) WriteSpans(context.Context, []Span) error { return nil }

func BenchmarkRecorder(b *testing.B) {
	r := NewRecorder(nopWriter{}, RecorderOptions{Logger: quietLogger(new(bytes.Buffer))})
	s := span(1)
	s.Attrs = map[string]any{AttrToolName: "lookup"}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Record(s)
		}
	})
	_ = r.Flush(context.Background())
	b.StopTimer()
	st := r.Stats()
	b.ReportMetric(float64(st.Recorded)/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(float64(st.Dropped), "dropped")
	_ = r.Close(context.Background())
}

// With many retries (a store away for a minute), Close does not wait for
// all of them: a batch being retried when Close comes gets at most
// closingRetries more.
func TestRecorderCloseBoundsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &memWriter{fail: 1 << 30, err: errWrite}
		var log bytes.Buffer
		r := NewRecorder(w, RecorderOptions{MaxRetries: 35, RetryBackoff: 50 * time.Millisecond,
			Logger: quietLogger(&log)})
		r.Record(span(1))
		go r.Flush(context.Background())
		time.Sleep(time.Second) // the batch is being retried
		start := time.Now()
		_ = r.Close(context.Background()) // the drop is reported to Flush or to Close, whichever asks first
		if st := r.Stats(); st.Dropped != 1 {
			t.Errorf("Stats = %+v; want the span dropped", st)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("Close took %v; want the few retries closingRetries allows, not a minute", d)
		}
		if st := r.Stats(); !strings.Contains(log.String(), fmt.Sprintf("attempts=%d", st.WriteErrors)) {
			t.Errorf("the drop's log line does not count the %d attempts made:\n%s", st.WriteErrors, log.String())
		}
	})
}
