package storetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/belay-run/belay/budget"
	"github.com/belay-run/belay/store"
	"github.com/belay-run/belay/trace"
)

// crashEnv carries the store address to the child process.
const crashEnv = "BELAY_STORETEST_CRASH_DSN"

// Crash amounts per iteration of the child.
const (
	crashReserve = budget.USD(1000)
	crashSettle  = budget.USD(700)
	crashSpans   = 5
	crashLines   = 400 // lines the parent reads before the SIGKILL
	crashScope   = budget.Scope("run:crash")
)

// Crash is the SIGKILL durability check. The calling test, named testName,
// re-executes the test binary as a child (os.Args[0] -test.run=^testName$)
// that opens dsn with open and writes in a loop: a batch of spans, a
// reservation then its settlement, an idempotency claim then its
// completion, a run; it prints a line after each commit. The parent reads
// crashLines lines, kills the child with SIGKILL, reopens dsn and checks
// that every reported write is there and that nothing is half applied (a
// span batch whole or absent; the ledger's balance a whole number of
// reservations and settlements).
//
// In the child, Crash never returns. open must not arrange cleanup that
// deletes the database.
func Crash(t *testing.T, testName, dsn string, open func(t *testing.T, dsn string) store.Store) {
	if child := os.Getenv(crashEnv); child != "" {
		crashChild(t, open(t, child))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+testName+"$", "-test.count=1", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), crashEnv+"="+dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	var lines []string
	sc := bufio.NewScanner(out)
	for len(lines) < crashLines && sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "committed ") {
			lines = append(lines, strings.TrimPrefix(l, "committed "))
		}
	}
	must(t, cmd.Process.Signal(syscall.SIGKILL))
	// The child went on until the kill: the lines it printed meanwhile
	// (in the pipe) are commits too, and the check must count them.
	read := len(lines)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "committed ") {
			lines = append(lines, strings.TrimPrefix(l, "committed "))
		}
	}
	cmd.Wait() //nolint:errcheck // killed: the error is expected
	if read < crashLines {
		t.Fatalf("the child reported %d commits before it stopped, want %d", read, crashLines)
	}
	s := open(t, dsn)
	defer s.Close()
	crashCheck(t, s, lines)
}

func crashChild(t *testing.T, s store.Store) {
	ctx := context.Background()
	w := bufio.NewWriter(os.Stdout)
	report := func(format string, a ...any) {
		fmt.Fprintf(w, "committed "+format+"\n", a...)
		w.Flush()
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	for i := 0; ; i++ {
		spans := make([]trace.Span, crashSpans)
		for j := range spans {
			spans[j] = span("crash", fmt.Sprintf("c%06d-%d", i, j), "", time.Duration(i)*time.Second)
		}
		if err := s.WriteSpans(ctx, spans); err != nil {
			fail(err)
		}
		report("spans %d", i)
		id := fmt.Sprintf("r%06d", i)
		if err := s.Reserve(ctx, budget.Reservation{ID: id, Owner: "crash", Amount: crashReserve,
			Scopes: []budget.ScopeLimit{{Scope: crashScope}}}); err != nil {
			fail(err)
		}
		report("reserved %s", id)
		if err := s.Settle(ctx, id, crashSettle); err != nil {
			fail(err)
		}
		report("settled %s", id)
		key := fmt.Sprintf("k%06d", i)
		if _, err := s.Claim(ctx, key, "crash", time.Hour, t0); err != nil {
			fail(err)
		}
		if err := s.Complete(ctx, key, "crash", []byte(key), false); err != nil {
			fail(err)
		}
		report("completed %s", key)
		if err := s.CreateRun(ctx, sampleRun(fmt.Sprintf("run%06d", i), "crash", t0)); err != nil {
			fail(err)
		}
		report("run run%06d", i)
	}
}

func crashCheck(t *testing.T, s store.Store, lines []string) {
	ctx := context.Background()
	spans, err := s.RunSpans(ctx, "crash")
	must(t, err)
	batches := map[int]int{}
	for _, sp := range spans {
		i, _ := strconv.Atoi(sp.SpanID[1:7])
		batches[i]++
	}
	for i, n := range batches {
		if n != crashSpans {
			t.Errorf("span batch %d has %d spans, want %d (a half-applied batch)", i, n, crashSpans)
		}
	}
	reserved, settled := 0, 0
	for _, l := range lines {
		kind, arg, _ := strings.Cut(l, " ")
		switch kind {
		case "spans":
			if i, _ := strconv.Atoi(arg); batches[i] != crashSpans {
				t.Errorf("committed span batch %d is missing", i)
			}
		case "reserved":
			reserved++
			if err := s.Reserve(ctx, budget.Reservation{ID: arg, Amount: 1}); !errors.Is(err, store.ErrConflict) {
				t.Errorf("committed reservation %s: reserving its id again gave %v, want ErrConflict", arg, err)
			}
		case "settled":
			settled++
		case "completed":
			c, err := s.Claim(ctx, arg, "checker", time.Hour, t0)
			if err != nil || c.State != store.ClaimCompleted || string(c.Result) != arg {
				t.Errorf("committed key %s: Claim = %+v, %v; want completed with its result", arg, c, err)
			}
		case "run":
			if _, err := s.GetRun(ctx, arg); err != nil {
				t.Errorf("committed run %s: %v", arg, err)
			}
		}
	}
	b, err := s.Balance(ctx, crashScope)
	must(t, err)
	// The child may have committed one more step than it printed.
	n := int(b.Settled / crashSettle)
	open := int(b.Reserved / crashReserve)
	if b.Settled%crashSettle != 0 || b.Reserved%crashReserve != 0 || open > 1 ||
		n < settled || n > settled+1 || n+open < reserved || n+open > reserved+1 {
		t.Errorf("ledger after the kill: settled %d reserved %d; the child reported %d reservations, %d settlements",
			b.Settled, b.Reserved, reserved, settled)
	}
	t.Logf("the child reported %d commits; %d span batches, %d settlements, %d open reservations found",
		len(lines), len(batches), n, open)
}
