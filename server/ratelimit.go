package server

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpsearch/mcpsearch/config"
)

// limiters holds one token bucket per tool.
type limiters struct {
	mu      sync.Mutex
	cfg     func(tool string) config.RateLimit
	buckets map[string]*bucket
}

type bucket struct {
	perMinute int
	burst     int
	lim       *rate.Limiter
}

// limitState is what the X-RateLimit-* headers report.
type limitState struct {
	Limit     int
	Remaining int
	Reset     time.Time
}

func newLimiters(cfg func(tool string) config.RateLimit) *limiters {
	return &limiters{cfg: cfg, buckets: map[string]*bucket{}}
}

func (l *limiters) get(tool string) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[tool]
	if !ok {
		rl := l.cfg(tool)
		b = &bucket{perMinute: rl.PerMinute, burst: rl.Burst}
		if rl.PerMinute > 0 {
			b.lim = rate.NewLimiter(rate.Limit(float64(rl.PerMinute)/60), rl.Burst)
		}
		l.buckets[tool] = b
	}
	return b
}

// allow takes one token from tool's bucket. When none is left it reports
// how long until one is.
func (l *limiters) allow(tool string, now time.Time) (bool, time.Duration) {
	b := l.get(tool)
	if b.lim == nil {
		return true, 0
	}
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Minute
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// state reports tool's bucket at now; ok is false when the tool is not
// limited.
func (l *limiters) state(tool string, now time.Time) (limitState, bool) {
	b := l.get(tool)
	if b.lim == nil {
		return limitState{}, false
	}
	tokens := b.lim.TokensAt(now)
	remaining := int(math.Floor(tokens))
	if remaining < 0 {
		remaining = 0
	}
	missing := float64(b.burst) - tokens
	reset := now
	if missing > 0 {
		reset = now.Add(time.Duration(missing / (float64(b.perMinute) / 60) * float64(time.Second)))
	}
	return limitState{Limit: b.perMinute, Remaining: remaining, Reset: reset}, true
}
