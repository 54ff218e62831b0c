package postgres_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/belay-run/belay/internal/pgtest"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/postgres"
	"github.com/belay-run/belay/store/storetest"
)

const envURL = pgtest.EnvURL

func baseURL(t testing.TB) string {
	u := os.Getenv(envURL)
	if u == "" {
		t.Skip(envURL + " not set: PostgreSQL tests need a server; set it to e.g. " +
			"postgres://root@127.0.0.1:5432/test?sslmode=disable (the README's)")
	}
	return u
}

// schemaURL creates a schema of its own for one test (dropped at cleanup)
// and returns base with search_path set to it.
func schemaURL(t testing.TB) string { return pgtest.SchemaURL(t, baseURL(t), "belay_test") }

func openAt(t testing.TB, u string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	baseURL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openAt(t, schemaURL(t)) })
}

// TestReserveRaceTwoPools runs the ledger race over two stores (two
// pools, as two replicas would) on one schema.
func TestReserveRaceTwoPools(t *testing.T) {
	u := schemaURL(t)
	a, b := openAt(t, u), openAt(t, u)
	storetest.ReserveRace(t, func(i int) store.Store {
		if i%2 == 0 {
			return a
		}
		return b
	})
}

// TestConcurrentMigrations opens eight stores on one new schema at once:
// the advisory lock lets each migration step run once.
func TestConcurrentMigrations(t *testing.T) {
	u := schemaURL(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), u)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaTooNew(t *testing.T) {
	u := schemaURL(t)
	s := openAt(t, u)
	if _, err := s.Pool().Exec(context.Background(), `INSERT INTO schema_migrations (version) VALUES (999)`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.Open(context.Background(), u); !errors.Is(err, postgres.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: got %v, want ErrSchemaTooNew", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	baseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err == nil {
		t.Fatal("Open of a closed port: nil error")
	}
	t.Log(err)
}

// TestWatchKills checks that a kill set through one store reaches a
// watcher on another (another replica), and that a different schema's
// changes do not.
func TestWatchKills(t *testing.T) {
	u := schemaURL(t)
	a, b := openAt(t, u), openAt(t, u)
	other := openAt(t, schemaURL(t))
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := b.WatchKills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetKill(ctx, store.Kill{Target: store.KillTool, Name: "send_email"}); err != nil {
		t.Fatal(err)
	}
	<-ch // blocks until the notification arrives; the test timeout bounds it
	kills, err := b.ListKills(ctx)
	if err != nil || len(kills) != 1 || kills[0].Name != "send_email" {
		t.Fatalf("after the notification: ListKills = %+v, %v", kills, err)
	}
	// A change in another schema, then one in ours: the first value the
	// watcher sees must come after our change is visible.
	if err := other.SetKill(ctx, store.Kill{Target: store.KillAll}); err != nil {
		t.Fatal(err)
	}
	if err := a.ClearKill(ctx, store.KillTool, "send_email"); err != nil {
		t.Fatal(err)
	}
	<-ch
	if kills, err := b.ListKills(ctx); err != nil || len(kills) != 0 {
		t.Fatalf("after the clear notification: ListKills = %+v, %v", kills, err)
	}
	cancel()
	for range ch { // closed when ctx ends
	}
}

func TestCrashSIGKILL(t *testing.T) {
	u := ""
	if os.Getenv("BELAY_STORETEST_CRASH_DSN") == "" {
		u = schemaURL(t)
	}
	storetest.Crash(t, "TestCrashSIGKILL", u, func(t *testing.T, u string) store.Store {
		s, err := postgres.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func BenchmarkWriteSpans(b *testing.B) { storetest.BenchWriteSpans(b, openAt(b, schemaURL(b))) }

func BenchmarkReserveSettle(b *testing.B) {
	storetest.BenchReserveSettle(b, openAt(b, schemaURL(b)), 1)
}

func BenchmarkReserveSettleParallel(b *testing.B) {
	storetest.BenchReserveSettle(b, openAt(b, schemaURL(b)), 8)
}
