package memstore

import (
	"testing"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
