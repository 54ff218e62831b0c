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
	for _, url := range []string{"memory://", "MEMORY://"} {
		st, err := open.Open(ctx, url)
		if err != nil {
			t.Errorf("Open(%q): %v", url, err)
			continue
		}
		if _, err := st.GetRun(ctx, "none"); err == nil {
			t.Errorf("Open(%q): a new store holds run none", url)
		}
		_ = st.Close()
	}
	if _, err := open.Open(ctx, "memory://x"); err == nil || !strings.Contains(err.Error(), "takes no path") {
		t.Errorf(`Open("memory://x"): %v`, err)
	}
	if _, err := open.Open(ctx, "sqlite://"); err == nil {
		t.Error(`Open("sqlite://"): nil error`)
	}
	if _, err := open.Open(ctx, ""); err == nil {
		t.Error(`Open(""): nil error`)
	}
}

// TestOpenCreatesDirectory: an SQLite file in a missing directory is
// created with the directory (0o755), as belay serve did and belay eval
// refused; a directory that cannot be made is an error that says so.
func TestOpenCreatesDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{
		"sqlite://" + filepath.Join(dir, "a", "b", "belay.db"),
		"file://" + filepath.Join(dir, "c", "belay.db"),
		filepath.Join(dir, "d", "belay.db"),
	} {
		s, err := open.Open(ctx, url)
		if err != nil {
			t.Errorf("Open(%q): %v", url, err)
			continue
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, sub := range []string{"a", "a/b", "c", "d"} {
		fi, err := os.Stat(filepath.Join(dir, sub))
		if err != nil {
			t.Errorf("%s: %v", sub, err)
			continue
		}
		// 0o755 less the umask: nothing beyond it, and the owner's bits.
		if perm := fi.Mode().Perm(); !fi.IsDir() || perm&^0o755 != 0 || perm&0o700 != 0o700 {
			t.Errorf("%s: mode %v, want a directory with 0o755 (less the umask)", sub, fi.Mode())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "b", "belay.db")); err != nil {
		t.Errorf("the store file: %v", err)
	}

	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := open.Open(ctx, "sqlite://"+filepath.Join(file, "sub", "belay.db"))
	want := "store/open: cannot create the directory of the store file " + filepath.Join(file, "sub", "belay.db") + ": "
	if err == nil || !strings.HasPrefix(err.Error(), want) || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open under a plain file: got %v, want an error starting %q", err, want)
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

func TestSQLitePath(t *testing.T) {
	for _, c := range []struct {
		url, path string
		ok        bool
	}{
		{"sqlite://belay.db", "belay.db", true},
		{"SQLite:///var/lib/belay.db", "/var/lib/belay.db", true},
		{"file://./x.db", "./x.db", true},
		{"data/belay.db", "data/belay.db", true},
		{"sqlite://", "", false},
		{"", "", false},
		{"memory://", "", false},
		{"postgres://root@h/db", "", false},
		{"c:x", "", false}, // a scheme without slashes: refused by Open
	} {
		if path, ok := open.SQLitePath(c.url); path != c.path || ok != c.ok {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q, %v", c.url, path, ok, c.path, c.ok)
		}
	}
}
