//go:build !unix

package h1

// alive cannot peek at a connection on this platform without a goroutine:
// an idle connection is taken as open unless it holds unasked bytes.
func alive(c *conn) bool { return c.br.Buffered() == 0 }
