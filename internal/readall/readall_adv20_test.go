package readall

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// Sized returns what io.ReadAll returns, for every hint (right, short,
// long, huge, unknown) and reader shape (one byte at a time, data with
// EOF, half reads, an error after data).
func TestAdv20SizedMatchesReadAll(t *testing.T) {
	errBoom := errors.New("boom")
	shapes := map[string]func(io.Reader) io.Reader{
		"plain":   func(r io.Reader) io.Reader { return r },
		"one":     iotest.OneByteReader,
		"dataerr": iotest.DataErrReader,
		"half":    iotest.HalfReader,
		"err": func(r io.Reader) io.Reader {
			return io.MultiReader(r, iotest.ErrReader(errBoom))
		},
	}
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 70000} {
		data := strings.Repeat("x", n)
		for name, shape := range shapes {
			for _, hint := range []int64{-1, 0, 1, int64(n) - 1, int64(n), int64(n) + 1, 2 * int64(n), 1 << 40} {
				want, werr := io.ReadAll(shape(strings.NewReader(data)))
				got, gerr := Sized(shape(strings.NewReader(data)), hint)
				if !bytes.Equal(want, got) || !errors.Is(gerr, werr) && werr != gerr {
					t.Errorf("n=%d %s hint=%d: got %d bytes, %v; want %d, %v", n, name, hint, len(got), gerr, len(want), werr)
				}
				if hint == int64(n) && n > 0 && cap(got) != n+1 && name == "plain" {
					t.Errorf("n=%d hint exact: cap %d, want %d", n, cap(got), n+1)
				}
			}
		}
	}
}
