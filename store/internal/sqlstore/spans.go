package sqlstore

import (
	"context"
	"fmt"

	"github.com/belay-run/belay/store/internal/codec"
	"github.com/belay-run/belay/trace"
)

const spanColumns = `span_id, trace_id, parent_id, run_id, kind, name, start_ns, end_ns, status, attrs, events`

var upsertSpan = `INSERT INTO spans (` + spanColumns + `) VALUES (` + placeholders(11) + `)
	ON CONFLICT (run_id, span_id) DO UPDATE SET trace_id = excluded.trace_id, parent_id = excluded.parent_id,
	kind = excluded.kind, name = excluded.name, start_ns = excluded.start_ns,
	end_ns = excluded.end_ns, status = excluded.status, attrs = excluded.attrs, events = excluded.events`

// WriteSpans stores spans in one transaction; a span with a stored run id
// and span id is replaced.
// Attributes and events are encoded before the transaction starts, so a
// value that cannot be encoded fails the batch without writing any of it.
func (c *Core) WriteSpans(ctx context.Context, spans []trace.Span) error {
	if len(spans) == 0 {
		return c.open("write spans")
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
// first), then span id.
func (c *Core) RunSpans(ctx context.Context, runID string) ([]trace.Span, error) {
	op := "run spans " + runID
	db, err := c.read(op)
	if err != nil {
		return nil, err
	}
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
