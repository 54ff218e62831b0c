package sqlite_test

import (
	"testing"

	"github.com/belay-run/belay/store/storetest"
)

func BenchmarkWriteSpans(b *testing.B) { storetest.BenchWriteSpans(b, openTemp(b)) }

func BenchmarkReserveSettle(b *testing.B) { storetest.BenchReserveSettle(b, openTemp(b), 1) }

func BenchmarkReserveSettleParallel(b *testing.B) { storetest.BenchReserveSettle(b, openTemp(b), 8) }

// BenchmarkModelCall: one gateway call's writes (storetest.BenchModelCall),
// 32 writers per GOMAXPROCS as under bench/gateway's throughput load.
func BenchmarkModelCall(b *testing.B) { storetest.BenchModelCall(b, openTemp(b), 32) }
