// Package ids makes the keys belay stores rows under.
package ids

import "github.com/google/uuid"

// New returns a UUIDv7 in its 36-character text form (RFC 9562): the first
// 48 bits are the Unix time in milliseconds, so keys made later sort later.
// A store's b-tree then takes new rows at its right edge, and a batch of
// writes touches a few pages instead of one random page per row (the write
// cost of a random UUIDv4 key in SQLite's WAL grows with the table). Falls
// back to a random UUIDv4 if the clock or random source fails. Safe for
// concurrent use.
func New() string {
	u, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return u.String()
}
