package sqlite

import (
	"context"
	"testing"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
)

// assign claims to match database/sql's Rows.Scan, but database/sql also
// scans into named types of a basic kind (by reflection): a write that
// scans into *budget.Scope, *store.ApprovalState, *budget.USD or *int32
// works on the read pool and fails on the writer's connection.
func TestAdv20WriterScanNamedKinds(t *testing.T) {
	ctx := context.Background()
	st, w := openWriterConn(t)
	b := st.b
	cases := []struct {
		col  string
		dest func() any
	}{
		{"'run:a'", func() any { return new(budget.Scope) }},
		{"'pending'", func() any { return new(store.ApprovalState) }},
		{"42", func() any { return new(budget.USD) }},
		{"42", func() any { return new(int32) }},
		{"42", func() any { return new(uint64) }},
	}
	for _, c := range cases {
		want, got := c.dest(), c.dest()
		werr := b.r.QueryRowContext(ctx, "SELECT "+c.col).Scan(want)
		rows, err := w.query(ctx, "SELECT "+c.col, nil)
		if err != nil {
			t.Fatal(err)
		}
		gerr := wrow{rows: rows}.Scan(got)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%s into %T: database/sql %v, writer %v", c.col, want, werr, gerr)
		}
	}
}
