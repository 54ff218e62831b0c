package dialect

import "fmt"

// KeepMax is the most bytes of a streamed answer (text, tool arguments)
// an Accumulator with Keep set keeps for the trace: 1 MiB. A stream has no
// length limit of its own, and the kept answer lives in memory until the
// call is recorded.
const KeepMax = 1 << 20

// DroppedNote is the text a kept answer ends with when n bytes past
// KeepMax were left out, so that a reader of the trace knows it is cut.
func DroppedNote(n int64) string {
	return fmt.Sprintf(" [belay: %d more bytes of this streamed answer were not recorded (over %d bytes)]", n, KeepMax)
}

// KeepBudget bounds what an accumulator keeps of one streamed answer to
// KeepMax bytes and counts what it leaves out. The zero value is ready to
// use; it is not safe for concurrent use.
type KeepBudget struct {
	size, dropped int64
}

// Append appends b to *dst as far as the budget allows; the rest is
// counted as dropped.
func (k *KeepBudget) Append(dst *[]byte, b string) {
	room := max(KeepMax-k.size, 0)
	if int64(len(b)) > room {
		k.dropped += int64(len(b)) - room
		b = b[:room]
	}
	*dst = append(*dst, b...)
	k.size += int64(len(b))
}

// Dropped returns the bytes Append left out.
func (k *KeepBudget) Dropped() int64 { return k.dropped }

// ByIndex returns the element of *s whose index (as index reads it) is i,
// appending fresh when there is none: an accumulator's choices, tool calls
// and content blocks come by index, interleaved.
func ByIndex[T any](s *[]T, i int, index func(*T) int, fresh T) *T {
	for j := range *s {
		if index(&(*s)[j]) == i {
			return &(*s)[j]
		}
	}
	*s = append(*s, fresh)
	return &(*s)[len(*s)-1]
}
