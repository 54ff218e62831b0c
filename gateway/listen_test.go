package gateway_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belay-run/belay/config"
	"github.com/belay-run/belay/gateway"
)

// A port in use fails Serve before anything is built (no store file, no
// "gateway stopped" for a gateway that never started), and the error
// says how to pick another address (newcomer finding).
func TestServeOnAPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := config.Default()
	cfg.Listen = ln.Addr().String()
	db := filepath.Join(t.TempDir(), "belay.db")
	cfg.Store = "sqlite://" + db
	listened := false
	err = gateway.Serve(context.Background(), cfg, func(net.Addr) { listened = true })
	if err == nil || !strings.Contains(err.Error(), "address already in use") ||
		!strings.Contains(err.Error(), "another process listens on "+cfg.Listen+": give belay serve another address with --listen HOST:PORT") {
		t.Errorf("Serve on a port in use: %v", err)
	}
	if listened {
		t.Error("listening was called")
	}
	if m, _ := filepath.Glob(db + "*"); len(m) != 0 {
		t.Errorf("the store was opened: %v", m)
	}
}

// A gateway whose build fails (here a missing sim.script) logs no
// "gateway stopped": it never started (newcomer finding, session 18).
func TestFailedBuildLogsNoStop(t *testing.T) {
	cfg := config.Default()
	cfg.Store = "memory://"
	cfg.Sim.Script = filepath.Join(t.TempDir(), "missing.yaml")
	var logs strings.Builder
	_, err := gateway.Build(context.Background(), cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("Build with a missing script: %v", err)
	}
	if strings.Contains(logs.String(), "gateway stopped") {
		t.Errorf("a gateway that never started logged its stop:\n%s", logs.String())
	}
}
