//go:build unix

package h1

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// alive reports whether an idle connection can carry a request: the
// server has not closed it (a peek finds no end of stream) nor sent
// anything unasked. Servers close idle keep-alive connections on their
// own timers (Node's default is 5s); a request written to one would be
// lost. One non-blocking recv(MSG_PEEK), no goroutine.
func alive(c *conn) bool {
	if c.br.Buffered() > 0 {
		return false // bytes no request asked for
	}
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	cerr := rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		// EAGAIN: open with nothing to read. No error: the server's FIN
		// (0 bytes) or bytes no request asked for.
		ok = err == unix.EAGAIN || err == unix.EWOULDBLOCK
		return true // never wait for readiness
	})
	return cerr == nil && ok
}
