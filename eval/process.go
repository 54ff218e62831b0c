package eval

import (
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// drainWait bounds how long, after a command's own process has exited and
// its process group has been killed, belay keeps reading output from its
// pipes. Only a descendant that left the group (setsid) can hold them open
// that long; its output is then cut off.
const drainWait = 500 * time.Millisecond

// maxAgentOutput bounds what belay keeps of a command's stdout (its first
// bytes), and maxAgentStderr of its stderr (its last bytes): an agent that
// loops printing must not exhaust belay's memory before its timeout stops
// it (adversarial review: `yes` held 2.6 GB in 2 s). What is past them is
// read and dropped, so the command never blocks on a full pipe.
const (
	maxAgentOutput = 1 << 20
	maxAgentStderr = 64 << 10
)

// headBuf keeps the first max bytes written to it and counts them all.
type headBuf struct {
	b     []byte
	max   int
	total int64
}

func (h *headBuf) Write(p []byte) (int, error) {
	h.total += int64(len(p))
	if room := h.max - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// tailBuf keeps the last max bytes written to it.
type tailBuf struct {
	b   []byte
	max int
}

func (t *tailBuf) Write(p []byte) (int, error) {
	if len(p) >= t.max {
		t.b = append(t.b[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.max { // trimmed now and then, not at every write
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuf) bytes() []byte {
	if len(t.b) > t.max {
		return t.b[len(t.b)-t.max:]
	}
	return t.b
}

// runGroup runs cmd with stdin as its input in a process group of its own
// (on Unix) and waits for cmd's own process only. When that process exits
// (or the command's context is done, which kills the whole group), whatever
// it left running in its group is killed, so an agent is judged by its own
// exit and leaves nothing behind. It returns the first maxAgentOutput
// bytes the command wrote to its stdout and how many it wrote in all, the
// last maxAgentStderr bytes of its stderr, and cmd.Wait's error (an
// *exec.ExitError for a non-zero exit or a signal). cmd.Stdin, Stdout and
// Stderr must be unset.
func runGroup(cmd *exec.Cmd, stdin string) (stdout []byte, stdoutBytes int64, stderr []byte, err error) {
	var pipes []*os.File // every end belay holds, closed on return
	defer func() {
		for _, f := range pipes {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			pipes = append(pipes, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, 0, nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, 0, nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, 0, nil, err
	}
	// *os.File ends are handed to the child as they are: exec starts no
	// copying goroutines of its own, so Wait returns when the process exits
	// instead of when the last holder of a pipe closes it.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	inOwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, 0, nil, err
	}
	// The child has its copies; belay keeps only its own ends.
	inR.Close()
	outW.Close()
	errW.Close()

	outBuf, errBuf := headBuf{max: maxAgentOutput}, tailBuf{max: maxAgentStderr}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&outBuf, outR) })
	wg.Go(func() { _, _ = io.Copy(&errBuf, errR) })
	// Writing the input may block until the agent reads it, or fail once
	// nobody can (EPIPE); it never holds up the run.
	go func() {
		_, _ = io.Copy(inW, strings.NewReader(stdin))
		inW.Close()
	}()

	err = cmd.Wait()
	_ = killGroup(cmd.Process.Pid)
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	timer := time.NewTimer(drainWait)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		// A descendant outside the group still holds a pipe: stop reading.
		outR.Close()
		errR.Close()
		<-drained
	}
	inW.Close() // unblocks the input writer if nobody reads
	return outBuf.b, outBuf.total, errBuf.bytes(), err
}
