package sqlite

import (
	"context"
	"database/sql"
	"sync/atomic"
)

// Checkpointing. In WAL mode every commit appends to the WAL file, and a
// checkpoint copies the WAL back into the database file and fsyncs it.
// SQLite's automatic checkpoint runs inside the commit that crosses the
// threshold, so that one write pays for an fsync. Here the write connection
// checkpoints by itself only past autoCheckpointPages (a safety net), and a
// goroutine runs a PASSIVE checkpoint, which does not block writers, after
// every checkpointEvery commits.
const (
	checkpointEvery     = 256
	autoCheckpointPages = 10000 // 40 MB of 4 KiB pages
)

type checkpointer struct {
	db      *sql.DB
	commits atomic.Int64
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

func startCheckpointer(db *sql.DB) *checkpointer {
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go c.loop(ctx)
	return c
}

// committed counts a commit and wakes the goroutine every checkpointEvery
// commits; it never blocks.
func (c *checkpointer) committed() {
	if c.commits.Add(1)%checkpointEvery != 0 {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default: // a checkpoint is already due
	}
}

func (c *checkpointer) loop(ctx context.Context) {
	defer close(c.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
			// A failed checkpoint (a reader holding an old snapshot, a busy
			// file) is retried at the next kick; the WAL only grows meanwhile.
			c.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`) //nolint:errcheck
		}
	}
}

// stop ends the goroutine and waits for it.
func (c *checkpointer) stop() {
	c.cancel()
	<-c.done
}
