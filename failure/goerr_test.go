package failure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestClassifyError(t *testing.T) {
	existing := New(RateLimited, "slow down")
	tests := []struct {
		name   string
		err    error
		reason Reason
		kind   Kind
	}{
		{"deadline", context.DeadlineExceeded, Timeout, Transient},
		{"wrapped deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), Timeout, Transient},
		{"canceled", fmt.Errorf("post: %w", context.Canceled), Canceled, Fatal},
		{"net timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, Timeout, Transient},
		{"os deadline", fmt.Errorf("read: %w", os.ErrDeadlineExceeded), Timeout, Transient},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, ConnectionError, Transient},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), ConnectionError, Transient},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), ConnectionError, Transient},
		{"closed", net.ErrClosed, ConnectionError, Transient},
		{"unexpected EOF", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), ConnectionError, Transient},
		{"EOF", io.EOF, ConnectionError, Transient},
		{"dns", &net.DNSError{Err: "no such host", Name: "api.example"}, ConnectionError, Transient},
		{"other op error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("weird")}, ConnectionError, Transient},
		{"unknown", errors.New("something else"), Unknown, Permanent},
		{"already classified", fmt.Errorf("attempt: %w", existing), RateLimited, Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ClassifyError(tt.err)
			if e.Reason != tt.reason || e.Kind != tt.kind {
				t.Fatalf("got %s/%s, want %s/%s", e.Kind, e.Reason, tt.kind, tt.reason)
			}
			if !errors.Is(e, tt.err) && e != existing {
				t.Errorf("cause lost: %v", e)
			}
			if KindOf(tt.err) != tt.kind {
				t.Errorf("KindOf = %s, want %s", KindOf(tt.err), tt.kind)
			}
		})
	}
	if ClassifyError(nil) != nil || KindOf(nil) != OK {
		t.Error("nil error classified")
	}
	if got := ClassifyError(fmt.Errorf("x: %w", existing)); got != existing {
		t.Errorf("an existing *Error was not returned as is: %v", got)
	}
}
