package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconnection backoff of WatchKills after its connection fails.
const (
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// WatchKills listens for kill flag changes made through any Store on this
// database and schema (any replica). The channel (buffer 1) receives a
// value after one or more changes, coalesced: the receiver should re-read
// ListKills. It is closed when ctx ends. The listener holds one
// connection of its own; if it fails, it reconnects with backoff (100ms
// doubling to 5s) and then sends a value, since changes may have been
// missed meanwhile.
func (s *Store) WatchKills(ctx context.Context) (<-chan struct{}, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: watch kills: %w", err)
	}
	ch := make(chan struct{}, 1)
	go s.watch(ctx, conn, ch)
	return ch, nil
}

// listen takes a connection out of the pool and LISTENs on it.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, "LISTEN "+killChannel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

func (s *Store) watch(ctx context.Context, conn *pgx.Conn, ch chan struct{}) {
	defer close(ch)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default: // a change is already pending
		}
	}
	wait := watchRetryMin
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			wait = watchRetryMin
			if n.Payload == s.schema {
				signal()
			}
			continue
		}
		conn.Close(context.Background())
		for {
			if ctx.Err() != nil {
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, watchRetryMax)
			if conn, err = s.listen(ctx); err == nil {
				signal()
				break
			}
		}
	}
}
