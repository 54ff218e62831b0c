package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/sqlite"
	"github.com/belay-run/belay/store/storetest"
)

// TestCrashSIGKILL kills a child process that is writing to the file and
// checks that every write it reported committed survived, whole.
func TestCrashSIGKILL(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "crash.db")
	if os.Getenv("BELAY_STORETEST_CRASH_DSN") != "" {
		dsn = "" // the child: Crash takes the path from the environment
	}
	storetest.Crash(t, "TestCrashSIGKILL", dsn, func(t *testing.T, path string) store.Store {
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
