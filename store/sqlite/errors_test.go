package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/sqlite"
	"github.com/belay-run/belay/store/storetest"
)

func TestOpenMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "belay.db")
	_, err := sqlite.Open(t.Context(), path)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open in a missing directory: got %v, want fs.ErrNotExist naming %s", err, path)
	}
}

func TestOpenNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	junk := make([]byte, 8192)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(rng.UintN(256))
	}
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(t.Context(), path)
	if !errors.Is(err, sqlite.ErrNotDatabase) || !strings.HasPrefix(err.Error(), "store/sqlite: open "+path+": ") {
		t.Fatalf("Open of random bytes: got %v, want ErrNotDatabase naming %s", err, path)
	}
	t.Log(err)
}

// rawDB opens the file with the driver directly, as another program would.
func rawDB(t *testing.T, path string) *sql.DB {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLocked(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := sqlite.OpenOptions(ctx, path, sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := rawDB(t, path)
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO goldens (name, run_id, canonical) VALUES ('x', 'r', x'00')`); err != nil {
		t.Fatal(err)
	}
	err = s.Reserve(ctx, budget.Reservation{ID: "a", Amount: 1, Scopes: []budget.ScopeLimit{{Scope: "run:a"}}})
	if !errors.Is(err, sqlite.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Reserve while another connection writes: got %v, want ErrLocked naming %s", err, path)
	}
	// Reads do not wait for the writer.
	if b, err := s.Balance(ctx, "run:a"); err != nil || b.Reserved != 0 {
		t.Fatalf("Balance during the lock = %+v, %v", b, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(ctx, budget.Reservation{ID: "a", Amount: 1, Scopes: []budget.ScopeLimit{{Scope: "run:a"}}}); err != nil {
		t.Fatalf("Reserve after the lock ended: %v", err)
	}
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := rawDB(t, path).Exec(`INSERT INTO schema_migrations (version) VALUES (999)`); err != nil {
		t.Fatal(err)
	}
	_, err = sqlite.Open(t.Context(), path)
	if !errors.Is(err, sqlite.ErrSchemaTooNew) || !strings.Contains(err.Error(), "999") {
		t.Fatalf("Open of a newer schema: got %v, want ErrSchemaTooNew naming version 999", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveGolden(ctx, "g", "r1", []byte("canon")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, run, err := s.Golden(ctx, "g"); err != nil || string(c) != "canon" || run != "r1" {
		t.Fatalf("after reopen: Golden = %q, %q, %v", c, run, err)
	}
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
}

// TestReserveRaceManyHandles runs the ledger race over four stores open on
// one file: separate connections, locking through SQLite's file locks.
func TestReserveRaceManyHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	var handles []store.Store
	for range 4 {
		s, err := sqlite.OpenOptions(t.Context(), path, sqlite.Options{BusyTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		handles = append(handles, s)
	}
	storetest.ReserveRace(t, func(i int) store.Store { return handles[i%len(handles)] })
}
