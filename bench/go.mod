module github.com/belay-run/belay/bench

go 1.26.0

replace github.com/belay-run/belay => ../

require (
	github.com/belay-run/belay v0.0.0-00010101000000-000000000000
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sony/gobreaker/v2 v2.4.0
)

require (
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
