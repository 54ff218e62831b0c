// Package storetest is the conformance suite every store.Store backend
// passes. A backend's test calls Run with a function that opens a fresh,
// empty store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite also exports the pieces a backend runs in its own setting:
// ReserveRace over several handles to one database, Crash for the SIGKILL
// durability check, and the benchmarks BenchWriteSpans and
// BenchReserveSettle.
//
// Behaviour the suite fixes beyond the store interfaces' comments:
//   - ListRuns orders by start time then id, both descending;
//   - a reservation id can be used once: reserving it again, even after it
//     was settled, released or expired, is store.ErrConflict;
//   - TakeOver of an absent key is store.ErrConflict; Complete and Abandon
//     by anyone but the owner of an in-flight key are store.ErrConflict;
//   - DecideApproval of an absent id is store.ErrNotFound;
//   - ClearKill of an absent flag is not an error;
//   - SaveGolden replaces a golden of the same name.
package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
)

// Opener returns a fresh, empty store for one test and arranges its Close
// with t.Cleanup.
type Opener func(t *testing.T) store.Store

// Run runs the whole suite, one subtest per area, each on a fresh store.
func Run(t *testing.T, open Opener) {
	t.Run("Runs", func(t *testing.T) { testRuns(t, open(t)) })
	t.Run("SaveRun", func(t *testing.T) { testSaveRun(t, open(t)) })
	t.Run("CreateRunSpent", func(t *testing.T) { testCreateRunSpent(t, open(t)) })
	t.Run("RunsList", func(t *testing.T) { testRunsList(t, open(t)) })
	t.Run("PruneRuns", func(t *testing.T) { testPruneRuns(t, open(t)) })
	t.Run("Spans", func(t *testing.T) { testSpans(t, open(t)) })
	t.Run("SpanAttrs", func(t *testing.T) { testSpanAttrs(t, open(t)) })
	t.Run("Ledger", func(t *testing.T) { testLedger(t, open(t)) })
	t.Run("LedgerMultiScope", func(t *testing.T) { testLedgerMultiScope(t, open(t)) })
	t.Run("LedgerExpiry", func(t *testing.T) { testLedgerExpiry(t, open(t)) })
	t.Run("LedgerRenew", func(t *testing.T) { testLedgerRenew(t, open(t)) })
	t.Run("LedgerErrors", func(t *testing.T) { testLedgerErrors(t, open(t)) })
	t.Run("LedgerBatch", func(t *testing.T) { testLedgerBatch(t, open(t)) })
	t.Run("Alerts", func(t *testing.T) { testAlerts(t, open(t)) })
	t.Run("ReserveRace", func(t *testing.T) {
		s := open(t)
		ReserveRace(t, func(int) store.Store { return s })
	})
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, open(t)) })
	t.Run("IdempotencyRace", func(t *testing.T) { testIdempotencyRace(t, open(t)) })
	t.Run("Approvals", func(t *testing.T) { testApprovals(t, open(t)) })
	t.Run("Kills", func(t *testing.T) { testKills(t, open(t)) })
	t.Run("Goldens", func(t *testing.T) { testGoldens(t, open(t)) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open(t)) })
}

// t0 is the suite's clock origin; times are built from it, never read from
// the wall clock.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 123456789, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testClosed(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(t, s.Close())
	if _, err := s.GetRun(ctx, "x"); err == nil {
		t.Error("GetRun after Close: nil error")
	}
	if err := s.CreateRun(ctx, store.Run{ID: "x"}); err == nil {
		t.Error("CreateRun after Close: nil error")
	}
	if err := s.Close(); err == nil {
		t.Error("second Close: nil error")
	}
}

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) next() int64 { return c.n.Add(1) - 1 }
func (c *atomicCounter) load() int64 { return c.n.Load() }
