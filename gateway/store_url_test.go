package gateway_test

import (
	"testing"

	"github.com/belay-run/belay/gateway"
)

// Only memory:// is the in-memory store: a bare "memory" is a SQLite file
// path, as any value without a scheme is.
func TestInMemoryStoreNeedsItsScheme(t *testing.T) {
	for url, want := range map[string]bool{
		"memory://": true, "MEMORY://": true, "memory://x": false, // a path: refused by store/open
		"memory": false, "./memory": false, "sqlite://memory": false, "memory.db": false, "": false,
	} {
		if got := gateway.InMemoryStore(url); got != want {
			t.Errorf("InMemoryStore(%q) = %v, want %v", url, got, want)
		}
	}
}
