package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/belay-run/belay/store/internal/sqlstore"
)

// Past maxStmts, statements are prepared per use and closed: queries,
// execs and failing ones keep working, in two transactions running the
// same texts, and a statement that fails to prepare fails its write alone.
func TestAdv20StatementCacheOverflow(t *testing.T) {
	ctx := context.Background()
	_, b := openTest(t)
	run := func() error {
		return b.Write(ctx, func(tx sqlstore.Tx) error {
			for i := range maxStmts + 50 {
				if _, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO budget_scopes (scope, settled, reserved) VALUES ($1, %d, 0)
					ON CONFLICT (scope) DO UPDATE SET settled = settled + 1`, i), fmt.Sprint("c", i)); err != nil {
					return err
				}
				var n int64
				if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT settled - %d FROM budget_scopes WHERE scope = $1`, i), fmt.Sprint("c", i)).Scan(&n); err != nil {
					return err
				}
				rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT scope, %d FROM budget_scopes WHERE scope = $1`, i), fmt.Sprint("c", i))
				if err != nil {
					return err
				}
				k := 0
				for rows.Next() {
					k++
				}
				rows.Close()
				if k != 1 || rows.Err() != nil {
					return fmt.Errorf("query %d: %d rows, %v", i, k, rows.Err())
				}
			}
			return nil
		})
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(ctx, func(tx sqlstore.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO nosuchtable VALUES ($1)`, 1)
		return err
	}); err == nil {
		t.Fatal("bad statement succeeded")
	}
	var n int64
	if err := b.Write(ctx, func(tx sqlstore.Tx) error {
		return tx.QueryRow(ctx, `SELECT settled FROM budget_scopes WHERE scope = $1`, "c5").Scan(&n)
	}); err != nil || n != 6 {
		t.Fatalf("after: %d, %v", n, err)
	}
}
