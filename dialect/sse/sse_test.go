package sse_test

import (
	"io"
	"strings"
	"testing"

	"github.com/belay-run/belay/dialect/sse"
)

func TestFormatAndRead(t *testing.T) {
	stream := string(sse.Format("", []byte(`{"a":1}`))) + ": comment\n\n" +
		string(sse.Format("message_stop", []byte("line1\nline2"))) + "data: [DONE]\n\n"
	if !strings.HasPrefix(stream, "data: {\"a\":1}\n\n: comment\n\nevent: message_stop\ndata: line1\ndata: line2\n\n") {
		t.Fatalf("%q", stream)
	}
	r := sse.NewReader(strings.NewReader(stream))
	var got []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Name+"="+string(ev.Data))
	}
	want := []string{`={"a":1}`, "message_stop=line1\nline2", "=[DONE]"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q", got)
	}
}

func TestReaderCutEvent(t *testing.T) {
	r := sse.NewReader(strings.NewReader("data: {\"a\":1}\n\ndata: {\"b\""))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("err = %v, want ErrUnexpectedEOF", err)
	}
}
