package retry

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done, and then returns ctx.Err() (nil
// when the wait ran out). A d of zero or less returns at once. It uses a
// timer, so testing/synctest drives it with fake time.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
