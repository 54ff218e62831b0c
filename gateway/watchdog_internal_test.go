package gateway

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// The watchdog cancels at the deadline of its last arm, with that arm's
// cause: a later deadline (a re-arm on a read) moves the cancel later
// without a timer operation, an earlier one moves it earlier, a stop or a
// disarm ends it.
func TestWatchdogDeadlines(t *testing.T) {
	// after waits d of fake time and reports the context's cause (nil
	// while it is not canceled).
	after := func(ctx context.Context, d time.Duration) error {
		time.Sleep(d)
		synctest.Wait()
		return context.Cause(ctx)
	}
	t.Run("fires at its deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, w := newWatchdog(context.Background())
			w.arm(time.Second, errFirstByte)
			if err := after(ctx, time.Second-time.Millisecond); err != nil {
				t.Fatalf("canceled before the deadline: %v", err)
			}
			err := after(ctx, time.Millisecond)
			if !errors.Is(err, errFirstByte) || timeoutCause(ctx) == nil {
				t.Fatalf("at the deadline: %v; want the first_byte timeout", err)
			}
		})
	})
	t.Run("a later re-arm moves it later", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, w := newWatchdog(context.Background())
			w.arm(time.Second, errIdle)
			set := w.fire
			if err := after(ctx, 100*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			w.arm(time.Second, errIdle)
			if w.fire != set {
				t.Errorf("a later re-arm set the timer again (for %v, was %v): it should only note the deadline", w.fire, set)
			}
			for range 10 { // a read every half second keeps it alive
				if err := after(ctx, 500*time.Millisecond); err != nil {
					t.Fatalf("canceled while reads came: %v", err)
				}
				w.arm(time.Second, errIdle)
			}
			if err := after(ctx, time.Second-time.Millisecond); err != nil {
				t.Fatalf("canceled before the last arm's deadline: %v", err)
			}
			if err := after(ctx, time.Millisecond); !errors.Is(err, errIdle) {
				t.Fatalf("at the last arm's deadline: %v; want the idle timeout", err)
			}
		})
	})
	t.Run("an earlier deadline moves it earlier", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, w := newWatchdog(context.Background())
			w.arm(10*time.Second, errFirstByte)
			w.arm(time.Second, errFirstToken)
			err := after(ctx, time.Second)
			var te *timeoutError
			if !errors.Is(err, errFirstToken) || !errors.As(err, &te) || te.d != time.Second {
				t.Fatalf("after 1s: %v; want the first_token timeout of 1s", err)
			}
		})
	})
	t.Run("a shorter phase after a longer one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, w := newWatchdog(context.Background())
			w.arm(5*time.Second, errFirstByte)
			if err := after(ctx, 4*time.Second); err != nil {
				t.Fatal(err)
			}
			w.arm(2*time.Second, errIdle) // due at 6s, after the timer's 5s
			if err := after(ctx, 2*time.Second-time.Millisecond); err != nil {
				t.Fatalf("canceled before 6s: %v", err)
			}
			if err := after(ctx, time.Millisecond); !errors.Is(err, errIdle) {
				t.Fatalf("at 6s: %v; want the idle timeout", err)
			}
		})
	})
	t.Run("stop and disarm end it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, w := newWatchdog(context.Background())
			w.arm(time.Second, errIdle)
			w.arm(0, nil)
			if err := after(ctx, time.Hour); err != nil {
				t.Fatalf("disarmed, canceled anyway: %v", err)
			}
			w.arm(time.Second, errIdle)
			w.stop()
			if err := after(ctx, time.Hour); !errors.Is(err, context.Canceled) || timeoutCause(ctx) != nil {
				t.Fatalf("stopped: %v; want context.Canceled, no timeout", err)
			}
		})
	})
}
