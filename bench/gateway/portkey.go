package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// portkeyVersion is the Portkey gateway the figures were measured
// with (npm @portkey-ai/gateway).
const portkeyVersion = "1.15.2"

// startPortkey installs @portkey-ai/gateway@1.15.2 from the npm registry
// into a cache directory (once; within installWait), starts it headless on
// a free port and returns a target that reaches upstream through it with
// the x-portkey-provider and x-portkey-custom-host headers. Any failure is
// returned, and the caller skips Portkey.
func startPortkey(ctx context.Context, dir, upstream string, installWait time.Duration) (*child, *target, error) {
	if _, err := exec.LookPath("npm"); err != nil {
		return nil, nil, errors.New("npm is not installed")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	prefix := filepath.Join(cache, "belay-bench", "portkey-"+portkeyVersion)
	script := filepath.Join(prefix, "node_modules", "@portkey-ai", "gateway", "build", "start-server.js")
	if _, err := os.Stat(script); err != nil {
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			return nil, nil, err
		}
		ictx, cancel := context.WithTimeout(ctx, installWait)
		defer cancel()
		cmd := exec.CommandContext(ictx, "npm", "install", "--prefix", prefix, "--no-audit", "--no-fund",
			"--loglevel=error", "@portkey-ai/gateway@"+portkeyVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("npm install @portkey-ai/gateway@%s: %v: %s", portkeyVersion, err, tail(out, 400))
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	cmd := exec.CommandContext(ctx, "node", script, "--port="+port, "--headless")
	// Portkey refuses private custom hosts unless they are trusted.
	cmd.Env = append(os.Environ(), "NODE_ENV=production", "TRUSTED_CUSTOM_HOSTS=127.0.0.1,localhost")
	c, err := startChild(ctx, "portkey", cmd, filepath.Join(dir, "portkey.log"), false, 0)
	if err != nil {
		return nil, nil, err
	}
	base := "http://127.0.0.1:" + port
	h := http.Header{}
	h.Set("x-portkey-provider", "openai")
	h.Set("x-portkey-custom-host", upstream+"/v1")
	h.Set("Authorization", "Bearer sk-bench")
	t := newTarget("portkey", base+"/v1", "gpt-4o-mini", h)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := t.do(ctx, t.plain, false, nil)
		if err == nil && r.ok(false) {
			if r, err := t.do(ctx, t.stream, true, nil); err != nil || !r.ok(true) {
				t.noStream = fmt.Sprintf("a streamed request failed (status %d, %v); see portkey.log", r.status, err)
			}
			return c, t, nil
		}
		if time.Now().After(deadline) {
			c.stop()
			log, _ := os.ReadFile(filepath.Join(dir, "portkey.log"))
			return nil, nil, fmt.Errorf("portkey did not answer a request (status %d, %v): %s", r.status, err, tail(log, 400))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
