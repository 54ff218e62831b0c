package sqlite_test

import (
	"testing"

	"github.com/belay-run/belay/store/storetest"
)

func BenchmarkWriteSpans(b *testing.B) { storetest.BenchWriteSpans(b, openTemp(b)) }

func BenchmarkReserveSettle(b *testing.B) { storetest.BenchReserveSettle(b, openTemp(b), 1) }

func BenchmarkReserveSettleParallel(b *testing.B) { storetest.BenchReserveSettle(b, openTemp(b), 8) }
