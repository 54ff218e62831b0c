package main

import (
	"context"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/store/open"
	"github.com/belay-run/belay/trace"
)

// golden save refuses a run still running (its trace may still grow) and a
// name a suite's expect.golden could not name plainly; nothing is saved.
func TestGoldenSaveRefuses(t *testing.T) {
	url := seed(t)
	ctx := context.Background()
	st, err := open.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, store.Run{ID: "r3", Status: store.RunRunning, Started: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteSpans(ctx, runTrace("r3", trace.ToolExecuted)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	_, _, err = belay(t, url, "trace", "golden", "save", "r3", "half")
	wantCode(t, err, 1, "run r3 is still running: save it as a golden once it has ended")
	_, _, err = belay(t, url, "trace", "golden", "show", "half")
	wantCode(t, err, 1, "golden half not found")

	for _, name := range []string{"refund path", "tab\tname", "new\nline", "zero\u200bwidth", "rtl\u202eoverride"} {
		_, _, err = belay(t, url, "trace", "golden", "save", "r1", name)
		wantCode(t, err, 2, "want 1 to 200 bytes of UTF-8 without spaces, control or invisible characters")
	}
	_, _, err = belay(t, url, "trace", "golden", "save", "r1", "refunds/path-1.v2")
	wantCode(t, err, 0, "")
}
