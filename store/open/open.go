// Package open opens a store.Store from a URL, the form used in belay's
// configuration (store: sqlite://belay.db) and flags.
package open

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/memstore"
	"github.com/belay-run/belay/store/postgres"
	"github.com/belay-run/belay/store/sqlite"
)

// ErrScheme is returned for a URL whose scheme is not supported.
var ErrScheme = errors.New("store/open: unsupported store URL scheme")

// ErrURL is matched (errors.Is) by the errors of a URL that names no
// store: empty, sqlite:// without a file, memory:// with a path.
var ErrURL = errors.New("store/open: the store URL names no store")

// urlError is a URL's fault, in its own words, matching ErrURL.
type urlError string

func (e urlError) Error() string { return string(e) }
func (e urlError) Unwrap() error { return ErrURL }

// Open opens the store named by url:
//
//   - sqlite://belay.db (relative to the working directory),
//     sqlite:///var/lib/belay/belay.db (absolute), or a bare path such as
//     belay.db or ./data/belay.db: the embedded SQLite store (store/sqlite),
//     created on first use, with its parent directory (mode 0o755) when
//     that is missing;
//   - postgres://... or postgresql://...: the shared PostgreSQL store
//     (store/postgres), the URL passed to pgx as is;
//   - memory://: an in-memory store (store/memstore), for tests and
//     demos: nothing is kept once the process ends, and no other process
//     sees it. A bare "memory" is a SQLite file path, as every value
//     without a scheme is.
//
// Any other scheme is an error wrapping ErrScheme that lists the supported
// ones. The caller closes the store.
func Open(ctx context.Context, url string) (store.Store, error) {
	if path, ok := SQLitePath(url); ok {
		return openSQLite(ctx, path)
	}
	scheme, rest, hasScheme := strings.Cut(url, "://")
	switch {
	case url == "":
		return nil, urlError("store/open: empty store URL")
	case !hasScheme:
		return nil, fmt.Errorf("%w in %q: supported are sqlite://, postgres://, postgresql://, memory:// and a bare file path",
			ErrScheme, url)
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		return nil, urlError(fmt.Sprintf("store/open: %q names no file", url))
	case "postgres", "postgresql":
		return postgres.Open(ctx, url)
	case "memory":
		if rest != "" {
			return nil, urlError(fmt.Sprintf("store/open: %q: the in-memory store takes no path (memory://)", url))
		}
		return memstore.New(), nil
	}
	return nil, fmt.Errorf("%w %q: supported are sqlite://, postgres://, postgresql://, memory:// and a bare file path",
		ErrScheme, scheme+"://")
}

// SQLitePath returns the file of a SQLite store URL as Open reads it
// (sqlite://PATH, sqlite3://, file://, or a bare path), and false for any
// other URL. The path is as given: a relative one is taken from the
// working directory.
func SQLitePath(url string) (string, bool) {
	scheme, rest, hasScheme := strings.Cut(url, "://")
	if !hasScheme {
		if url == "" || strings.Contains(url, ":") && !strings.ContainsAny(url, `/\.`) {
			return "", false // "mysql:x" is a scheme, not a file
		}
		return url, true
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		return rest, rest != ""
	}
	return "", false
}

func openSQLite(ctx context.Context, path string) (store.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("store/open: cannot create the directory of the store file %s: %w", path, err)
	}
	return sqlite.Open(ctx, path)
}

// Redacted returns a store URL as messages show it: its password, in
// the user info or a password parameter, replaced by "xxxxx"; a string
// that does not parse as a URL with its user info and query replaced (an
// adversarial review: a password with a stray % was shown whole). A plain
// sqlite path is shown as it is.
func Redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// Not a URL: whatever stands between "//" and "@" may be a
		// password (one with a stray %, say), and so may the query.
		if i := strings.Index(s, "://"); i >= 0 {
			if j := strings.LastIndex(s, "@"); j > i {
				s = s[:i+3] + "xxxxx" + s[j:]
			}
		}
		if i := strings.IndexByte(s, '?'); i >= 0 {
			s = s[:i] + "?xxxxx"
		}
		return s
	}
	changed := false
	if strings.Contains(u.RawQuery, "password") { // PostgreSQL's URLs take one as a parameter
		q, err := url.ParseQuery(u.RawQuery)
		switch {
		case err != nil:
			u.RawQuery, changed = "xxxxx", true
		case q.Has("password"):
			q.Set("password", "xxxxx")
			u.RawQuery, changed = q.Encode(), true
		}
	}
	if u.User == nil && !changed {
		return s
	}
	return u.Redacted()
}
