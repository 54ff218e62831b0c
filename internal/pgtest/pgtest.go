// Package pgtest gives tests a PostgreSQL schema of their own on the
// server named by BELAY_TEST_POSTGRES_URL.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the environment variable with the test server's URL
// (.ci/run sets it): postgres://USER@HOST:PORT/DB?sslmode=disable.
const EnvURL = "BELAY_TEST_POSTGRES_URL"

// BaseURL returns the test server's URL, and whether it is set.
func BaseURL() (string, bool) {
	u := os.Getenv(EnvURL)
	return u, u != ""
}

// SchemaURL creates a schema named prefix_RANDOM on the test server
// (dropped when t ends) and returns the server's URL with its
// search_path set to it. It fails t when the server cannot be reached or
// its URL does not parse; the caller decides what an unset URL means
// (see BaseURL).
func SchemaURL(t testing.TB, base, prefix string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	ctx := context.Background()
	name := fmt.Sprintf("%s_%016x", prefix, rand.Uint64())
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
