package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/sqlite"
	"github.com/belay-run/belay/store/storetest"
)

func openTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openTemp(t) })
}
