package gateway

import "time"

// SetFinishWait sets how long st's gateway reads an upstream body's end
// after its stream's terminator (afterTerminatorWait in production):
// tests that check the connection is kept give the body's end more than
// a loaded machine's scheduling delay to come.
func SetFinishWait(st *Stack, d time.Duration) { st.Server.finishWait = d }

// AfterTerminatorWait is the production bound of SetFinishWait's wait.
const AfterTerminatorWait = afterTerminatorWait
