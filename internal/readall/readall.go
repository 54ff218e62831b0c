// Package readall reads a body to its end into one buffer sized from its
// declared length.
package readall

import "io"

// maxHint caps the buffer allocated up front from a hint: a larger body
// grows its buffer as it arrives, so a false Content-Length cannot make
// belay allocate more than this before any byte is read.
const maxHint = 4 << 20

// Sized is io.ReadAll with the buffer allocated once from hint, the
// body's declared length in bytes (Content-Length; -1 or 0 when unknown):
// a body of that length is read without the growth and copies of
// io.ReadAll, which starts at 512 bytes and grows by about a quarter at a
// time. A body longer than hint grows the buffer as io.ReadAll would; a
// hint over 4 MiB is taken as 4 MiB. It returns the bytes read and the
// first error other than io.EOF, as io.ReadAll does. Safe for concurrent
// use on different readers.
func Sized(r io.Reader, hint int64) ([]byte, error) {
	if hint <= 0 {
		return io.ReadAll(r)
	}
	// One byte over the hint: the read that finds the end needs room, and
	// a buffer that is full would otherwise be grown for it.
	b := make([]byte, 0, min(hint, maxHint)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grown as append grows a slice
		}
	}
}
