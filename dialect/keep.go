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
