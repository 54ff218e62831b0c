package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/internal/sqlstore"
)

// scopes returns the budget_scopes rows whose names start with prefix, as
// name → settled.
func scopes(t *testing.T, b *backend, prefix string) map[string]int64 {
	t.Helper()
	rows, err := b.w.Query(`SELECT scope, settled FROM budget_scopes WHERE scope LIKE ? || '%'`, prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var s string
		var n int64
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Deferrable writes share a transaction without savepoints. One that
// fails after changing rows leaves none of its changes; the writes before
// it, rolled back with it, run again and commit, each run counted; the
// writes after it commit in the same transaction. The writes run again
// include one whose caller left after it started: it had started, so it
// commits and its caller hears so.
func TestDeferrableFailureRunsTheOthersAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		bg := store.Deferrable(context.Background())
		// A request-path write: it commits at once, and the writer does
		// not rest after it, so the writes below run as they come.
		if err := b.Write(context.Background(), insertScope("warm")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		commits := b.ckpt.commits.Load()

		runs := make([]int, 3)
		write := func(i int) func(sqlstore.Tx) error {
			return func(tx sqlstore.Tx) error {
				runs[i]++ // only the writer goroutine runs write functions
				_, err := tx.Exec(context.Background(),
					`INSERT INTO budget_scopes (scope, settled, reserved) VALUES ($1, $2, 0)`, fmt.Sprint("r", i), int64(runs[i]))
				return err
			}
		}
		errs := make(chan error, 5)
		leftCtx, leave := context.WithCancel(bg)
		go func() { errs <- b.Write(bg, write(0)) }()
		synctest.Wait() // r0 ran; the transaction lingers
		go func() { errs <- b.Write(leftCtx, write(1)) }()
		synctest.Wait()
		leave() // r1 ran: its caller leaving does not undo it
		boom := errors.New("boom")
		failed := make(chan error, 1)
		go func() {
			failed <- b.Write(bg, func(tx sqlstore.Tx) error {
				if _, err := tx.Exec(context.Background(),
					`UPDATE budget_scopes SET settled = settled + 100 WHERE scope IN ('r0', 'r1')`); err != nil {
					return err
				}
				if _, err := tx.Exec(context.Background(),
					`INSERT INTO budget_scopes (scope, settled, reserved) VALUES ('bad', 0, 0)`); err != nil {
					return err
				}
				return boom
			})
		}()
		synctest.Wait()
		if err := <-failed; !errors.Is(err, boom) {
			t.Fatalf("the failing write: got %v, want its own error at once", err)
		}
		go func() { errs <- b.Write(bg, write(2)) }()
		for i := range 3 {
			if err := <-errs; err != nil {
				t.Fatalf("write %d of 3: %v", i, err)
			}
		}
		got := scopes(t, b, "")
		want := map[string]int64{"warm": 0, "r0": 2, "r1": 2, "r2": 1}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stored %v, want %v: the failed write's changes gone, r0 and r1 from their second run", got, want)
		}
		if runs[0] != 2 || runs[1] != 2 || runs[2] != 1 {
			t.Errorf("runs %v, want [2 2 1]", runs)
		}
		if n := b.ckpt.commits.Load() - commits; n != 1 {
			t.Errorf("%d commits, want 1 (the writes run again share the next commit)", n)
		}
	})
}

// A write that succeeded, then fails when it is run again after another's
// failure, gets its error alone; the other writes run again commit.
func TestDeferrableRunAgainFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, b := openTest(t)
		bg := store.Deferrable(context.Background())
		if err := b.Write(context.Background(), insertScope("warm")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		errs := make(chan error, 2)
		go func() { errs <- b.Write(bg, insertScope("a")) }()
		synctest.Wait()
		second := errors.New("failed on its second run")
		var n int
		flaky := make(chan error, 1)
		go func() {
			flaky <- b.Write(bg, func(tx sqlstore.Tx) error {
				if n++; n > 1 {
					return second
				}
				_, err := tx.Exec(context.Background(), `INSERT INTO budget_scopes (scope, settled, reserved) VALUES ('flaky', 0, 0)`)
				return err
			})
		}()
		synctest.Wait()
		go func() { errs <- b.Write(bg, insertScope("c")) }()
		synctest.Wait()
		if err := b.Write(bg, func(sqlstore.Tx) error { return errors.New("fails first") }); err == nil {
			t.Fatal("the failing write succeeded")
		}
		go func() { errs <- b.Write(bg, insertScope("d")) }()
		if err := <-flaky; !errors.Is(err, second) {
			t.Errorf("the write that failed when run again: got %v, want its error", err)
		}
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		got := scopes(t, b, "")
		want := map[string]int64{"warm": 0, "a": 0, "c": 0, "d": 0}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stored %v, want %v", got, want)
		}
	})
}
