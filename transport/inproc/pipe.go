package inproc

import (
	"io"
	"sync"
)

// pipeBuffer is how many bytes a handler may write ahead of its caller's
// reads, as a socket's send buffer holds them: a small answer is written
// whole at once even when the caller has not read it yet (the gateway
// writes answers up to 32 KiB before it settles their calls, counting on
// the kernel's buffers to take them).
const pipeBuffer = 64 << 10

// pipe connects the handler's writes to the caller's reads: a Write
// returns once its bytes fit in the buffer (pipeBuffer) and blocks while
// it is full; a Read takes what is buffered, or waits for more. Either end
// may close it with an error: writes then fail, and reads return what is
// buffered and then the writer's error (io.EOF for a clean end). Safe for
// one reader and one writer at a time.
type pipe struct {
	mu   sync.Mutex
	cond sync.Cond // signaled on every change of buf, werr, rerr
	buf  []byte
	werr error // the write end's close: io.EOF, or the error it gave
	rerr error // the read end's close
}

func newPipe() *pipe {
	p := &pipe{}
	p.cond.L = &p.mu
	return p
}

func (p *pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		switch {
		case p.rerr != nil:
			return n, p.rerr
		case p.werr != nil:
			return n, io.ErrClosedPipe
		case len(p.buf) >= pipeBuffer:
			p.cond.Wait()
			continue
		}
		k := min(pipeBuffer-len(p.buf), len(b))
		p.buf = append(p.buf, b[:k]...)
		b, n = b[k:], n+k
		p.cond.Broadcast()
	}
	return n, nil
}

func (p *pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.buf) == 0 {
		switch {
		case p.rerr != nil:
			return 0, io.ErrClosedPipe
		case p.werr != nil:
			return 0, p.werr
		}
		p.cond.Wait()
	}
	if len(b) == 0 {
		return 0, nil
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	if len(p.buf) == 0 {
		p.buf = nil // the next write starts a fresh buffer, not a tail
	}
	p.cond.Broadcast()
	return n, nil
}

// closeWrite ends the write end: reads return what is buffered, then err
// (io.EOF when nil). The first close wins.
func (p *pipe) closeWrite(err error) {
	if err == nil {
		err = io.EOF
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr == nil {
		p.werr = err
	}
	p.cond.Broadcast()
}

// closeRead ends the read end: writes fail with err (io.ErrClosedPipe when
// nil) and what is buffered is dropped. The first close wins.
func (p *pipe) closeRead(err error) {
	if err == nil {
		err = io.ErrClosedPipe
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.buf = nil
	p.cond.Broadcast()
}
