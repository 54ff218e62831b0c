package readall

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestSized(t *testing.T) {
	body := strings.Repeat("abcdefghij", 100) // 1000 bytes
	for _, c := range []struct {
		name string
		hint int64
	}{
		{"exact", 1000}, {"unknown", -1}, {"zero", 0}, {"short hint", 10}, {"long hint", 5000}, {"one under", 999},
	} {
		for _, r := range []struct {
			name string
			r    func() io.Reader
		}{
			{"whole", func() io.Reader { return strings.NewReader(body) }},
			{"byte at a time", func() io.Reader { return iotest.OneByteReader(strings.NewReader(body)) }},
			{"data with EOF", func() io.Reader { return iotest.DataErrReader(strings.NewReader(body)) }},
		} {
			got, err := Sized(r.r(), c.hint)
			if err != nil || string(got) != body {
				t.Errorf("%s, %s: %d bytes, %v; want the 1000 bytes", c.name, r.name, len(got), err)
			}
		}
	}
}

func TestSizedOneAllocationForTheDeclaredLength(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 64<<10)
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(body)
		if b, err := Sized(r, int64(len(body))); err != nil || len(b) != len(body) {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
	})
	if allocs != 1 {
		t.Errorf("%v allocations for a body of its declared length; want 1", allocs)
	}
	ra := testing.AllocsPerRun(20, func() { r.Reset(body); _, _ = io.ReadAll(r) })
	if ra <= 1 {
		t.Errorf("io.ReadAll made %v allocations: the comparison no longer shows a saving", ra)
	}
}

func TestSizedKeepsTheErrorAndTheBytes(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(boom))
	got, err := Sized(r, 100)
	if !errors.Is(err, boom) || string(got) != "partial" {
		t.Errorf("%q, %v; want \"partial\", boom", got, err)
	}
}

// A huge declared length allocates at most maxHint up front.
func TestSizedCapsTheHint(t *testing.T) {
	b, err := Sized(strings.NewReader("tiny"), 1<<40)
	if err != nil || string(b) != "tiny" {
		t.Fatalf("%q, %v", b, err)
	}
	if cap(b) > maxHint+1 {
		t.Errorf("cap %d for a declared 1 TiB; want at most %d", cap(b), maxHint+1)
	}
}
