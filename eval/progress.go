package eval

import (
	"io"
	"sync"

	"github.com/schollz/progressbar/v3"
)

// progress shows runs done on w (nil: nothing).
type progress struct {
	mu   sync.Mutex
	bar  *progressbar.ProgressBar
	fail int
}

func newProgress(w io.Writer, total int) *progress {
	if w == nil {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("runs"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100_000_000),
		progressbar.OptionClearOnFinish(),
	)}
}

func (p *progress) add(passed bool) {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !passed {
		p.fail++
	}
	_ = p.bar.Add(1)
}

func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
