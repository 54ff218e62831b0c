package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/belay-run/belay/store/internal/codec"
	"github.com/belay-run/belay/trace"
)

const spanColumns = `span_id, trace_id, parent_id, run_id, kind, name, start_ns, end_ns, status, attrs, events`

var upsertSpan = `INSERT INTO spans (` + spanColumns + `) VALUES (` + placeholders(11) + `)
	ON CONFLICT (run_id, span_id) DO UPDATE SET trace_id = excluded.trace_id, parent_id = excluded.parent_id,
	kind = excluded.kind, name = excluded.name, start_ns = excluded.start_ns,
	end_ns = excluded.end_ns, status = excluded.status, attrs = excluded.attrs, events = excluded.events`

// WriteSpans stores spans in one transaction; a span with a stored run id
// and span id is replaced. With Dialect.SpanBatches, each run's spans in
// the call are one row of span_batches (see writeSpanBatches); otherwise
// each span is a row of spans.
// Attributes and events are encoded before the transaction starts, so a
// value that cannot be encoded fails the batch without writing any of it.
func (c *Core) WriteSpans(ctx context.Context, spans []trace.Span) error {
	if len(spans) == 0 {
		return c.open("write spans")
	}
	if c.spanBatches {
		return c.writeSpanBatches(ctx, spans)
	}
	args := make([][]any, len(spans))
	for i, s := range spans {
		if s.SpanID == "" {
			return fmt.Errorf("%s: write spans: %w: span %d has an empty span id", c.name, codec.ErrInvalid, i)
		}
		attrs, err := codec.EncodeAttrs(s.Attrs)
		if err != nil {
			return fmt.Errorf("%s: write spans: span %s: %w", c.name, s.SpanID, err)
		}
		events, err := codec.EncodeEvents(s.Events)
		if err != nil {
			return fmt.Errorf("%s: write spans: span %s: %w", c.name, s.SpanID, err)
		}
		args[i] = []any{s.SpanID, s.TraceID, s.ParentID, s.RunID, string(s.Kind), s.Name,
			codec.NS(s.Start), codec.NS(s.End), string(s.Status), attrs, events}
	}
	return c.write(ctx, fmt.Sprintf("write %d spans", len(spans)), func(tx Tx) error {
		if b, ok := tx.(Batcher); ok {
			return b.ExecBatch(ctx, upsertSpan, args)
		}
		for _, a := range args {
			if _, err := tx.Exec(ctx, upsertSpan, a...); err != nil {
				return err
			}
		}
		return nil
	})
}

// RunSpans returns the spans of runID ordered by start time (a zero start
// first), then span id (compared byte by byte).
func (c *Core) RunSpans(ctx context.Context, runID string) ([]trace.Span, error) {
	op := "run spans " + runID
	db, err := c.read(op)
	if err != nil {
		return nil, err
	}
	out, err := c.spanRows(ctx, db, op, runID)
	if err != nil || !c.spanBatches {
		return out, err
	}
	return c.withSpanBatches(ctx, db, op, runID, out)
}

// spanRows reads runID's rows of spans, in RunSpans' order.
func (c *Core) spanRows(ctx context.Context, db Tx, op, runID string) ([]trace.Span, error) {
	rows, err := db.Query(ctx, `SELECT `+spanColumns+` FROM spans WHERE run_id = $1
		ORDER BY start_ns ASC NULLS FIRST, span_id ASC`, runID)
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer rows.Close()
	var out []trace.Span
	for rows.Next() {
		var (
			s             trace.Span
			kind, status  string
			start, end    *int64
			attrs, events *string
		)
		if err := rows.Scan(&s.SpanID, &s.TraceID, &s.ParentID, &s.RunID, &kind, &s.Name,
			&start, &end, &status, &attrs, &events); err != nil {
			return nil, c.fail(op, err)
		}
		s.Kind, s.Status, s.Start, s.End = trace.SpanKind(kind), trace.Status(status), codec.Time(start), codec.Time(end)
		if s.Attrs, err = codec.DecodeAttrs(attrs); err != nil {
			return nil, c.fail(op, fmt.Errorf("span %s: %w", s.SpanID, err))
		}
		if s.Events, err = codec.DecodeEvents(events); err != nil {
			return nil, c.fail(op, fmt.Errorf("span %s: %w", s.SpanID, err))
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	return out, nil
}

// insertSpanBatch stores one run's spans of one WriteSpans call.
const insertSpanBatch = `INSERT INTO span_batches (run_id, spans) VALUES ($1, $2)`

// writeSpanBatches is WriteSpans with Dialect.SpanBatches: the spans of
// each run in the call, in the call's order, encoded as one value
// (codec.EncodeSpanBatch) and written as one row, so a call's three or
// four spans cost one insert instead of one per span (in
// gateway.BenchmarkChatCompletion, per-span rows were about a third of
// SQLite's writer CPU per call). Every batch is encoded before the
// transaction: a span that cannot be encoded fails the call with nothing
// written.
func (c *Core) writeSpanBatches(ctx context.Context, spans []trace.Span) error {
	var runs []string
	byRun := map[string][]trace.Span{}
	for _, s := range spans {
		if _, ok := byRun[s.RunID]; !ok {
			runs = append(runs, s.RunID)
		}
		byRun[s.RunID] = append(byRun[s.RunID], s)
	}
	args := make([][]any, len(runs))
	for i, run := range runs {
		b, err := codec.EncodeSpanBatch(nil, byRun[run])
		if err != nil {
			return fmt.Errorf("%s: write spans: %w", c.name, err)
		}
		args[i] = []any{run, b}
	}
	return c.write(ctx, fmt.Sprintf("write %d spans", len(spans)), func(tx Tx) error {
		for _, a := range args {
			if _, err := tx.Exec(ctx, insertSpanBatch, a...); err != nil {
				return err
			}
		}
		return nil
	})
}

// withSpanBatches adds runID's span batches to its span rows (rows, in
// RunSpans' order): a batch written later replaces a span written earlier
// with the same id, rows being older than every batch. The result is in
// RunSpans' order.
func (c *Core) withSpanBatches(ctx context.Context, db Tx, op, runID string, rows []trace.Span) ([]trace.Span, error) {
	q, err := db.Query(ctx, `SELECT spans FROM span_batches WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer q.Close()
	out := rows
	at := make(map[string]int, len(rows))
	for i, s := range rows {
		at[s.SpanID] = i
	}
	batches := 0
	for q.Next() {
		var b []byte
		if err := q.Scan(&b); err != nil {
			return nil, c.fail(op, err)
		}
		spans, err := codec.DecodeSpanBatch(runID, b)
		if err != nil {
			return nil, c.fail(op, err)
		}
		for _, s := range spans {
			if i, ok := at[s.SpanID]; ok {
				out[i] = s
				continue
			}
			at[s.SpanID] = len(out)
			out = append(out, s)
		}
		batches++
	}
	if err := q.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	if batches > 0 {
		slices.SortFunc(out, func(a, b trace.Span) int {
			if d := cmp.Compare(spanStartKey(a), spanStartKey(b)); d != 0 {
				return d
			}
			return strings.Compare(a.SpanID, b.SpanID)
		})
	}
	return out, nil
}

// spanStartKey orders spans as RunSpans does: a zero start (stored as
// NULL) before every other.
func spanStartKey(s trace.Span) int64 {
	if s.Start.IsZero() {
		return math.MinInt64
	}
	return s.Start.UnixNano()
}
