package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// cancelOnListen is a stderr that ends ctx once serve says it listens.
type cancelOnListen struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnListen) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte("belay serve: listening on")) {
		w.cancel()
	}
	return w.buf.Write(p)
}

// serve, with GOMAXPROCS unset, ended right after it listens: the Ps
// are back to what they were and no procs.Run goroutine is left.
func TestServeRestoresProcs_adv21(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	t.Setenv("GOGC", "100") // so serve leaves the test process's GC percent alone
	before := runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRoot()
	w := &cancelOnListen{cancel: cancel}
	root.SetOut(&bytes.Buffer{})
	root.SetErr(w)
	root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--store", "memory://"})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("serve: %v (stderr %q)", err, w.buf.String())
	}
	if !strings.Contains(w.buf.String(), "listening on") {
		t.Fatalf("serve never listened: %q", w.buf.String())
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS after serve = %d, want %d", got, before)
	}
	buf := make([]byte, 1<<20)
	if st := string(buf[:runtime.Stack(buf, true)]); strings.Contains(st, "internal/procs.Run") {
		t.Errorf("a procs.Run goroutine is left after serve returned:\n%s", st)
	}
}
