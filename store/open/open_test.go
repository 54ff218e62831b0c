package open_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belay-run/belay/store/open"
	"github.com/belay-run/belay/store/sqlite"
)

func TestOpenSQLiteForms(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("data", 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "abs.db")
	for url, file := range map[string]string{
		"sqlite://rel.db":      filepath.Join(dir, "rel.db"),
		"sqlite://data/sub.db": filepath.Join(dir, "data", "sub.db"),
		"sqlite://" + abs:      abs,
		"bare.db":              filepath.Join(dir, "bare.db"),
		"./data/bare2.db":      filepath.Join(dir, "data", "bare2.db"),
	} {
		s, err := open.Open(context.Background(), url)
		if err != nil {
			t.Errorf("Open(%q): %v", url, err)
			continue
		}
		if _, ok := s.(*sqlite.Store); !ok {
			t.Errorf("Open(%q) = %T, want *sqlite.Store", url, s)
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("Open(%q) did not create %s: %v", url, file, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{"mysql://root@localhost/belay", "redis://x", "mongodb://h/db"} {
		_, err := open.Open(ctx, url)
		if !errors.Is(err, open.ErrScheme) || !strings.Contains(err.Error(), "sqlite://") ||
			!strings.Contains(err.Error(), "postgres://") {
			t.Errorf("Open(%q): got %v, want ErrScheme listing the supported schemes", url, err)
		}
	}
	if _, err := open.Open(ctx, "sqlite://"); err == nil {
		t.Error(`Open("sqlite://"): nil error`)
	}
	if _, err := open.Open(ctx, ""); err == nil {
		t.Error(`Open(""): nil error`)
	}
	missing := filepath.Join(t.TempDir(), "missing", "belay.db")
	if _, err := open.Open(ctx, "sqlite://"+missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open in a missing directory: got %v, want fs.ErrNotExist", err)
	}
}

func TestOpenPostgres(t *testing.T) {
	// Only the scheme dispatch is checked here, against a closed port:
	// store/postgres tests the store itself.
	_, err := open.Open(context.Background(), "postgresql://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil || !strings.HasPrefix(err.Error(), "store/postgres: ") {
		t.Errorf("Open(postgresql://closed port): got %v, want a store/postgres error", err)
	}
}
