package server

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpsearch/mcpsearch/config"
)

// limiters holds one token bucket per caller and tool: one tenant's calls
// never spend another's tokens. A caller is an API key; without keys (stdio,
// where each client runs its own process, or a loopback listener) all
// callers share the tool's bucket.
type limiters struct {
	mu      sync.Mutex
	cfg     func(tool string) config.RateLimit
	buckets map[bucketKey]*bucket
}

// bucketKey names one bucket. Keys are the configured API keys' names, so
// the map is bounded by keys × tools.
type bucketKey struct{ caller, tool string }

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
	return &limiters{cfg: cfg, buckets: map[bucketKey]*bucket{}}
}

func (l *limiters) get(caller, tool string) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[bucketKey{caller, tool}]
	if !ok {
		rl := l.cfg(tool)
		b = &bucket{perMinute: rl.PerMinute, burst: rl.Burst}
		if rl.PerMinute > 0 {
			b.lim = rate.NewLimiter(rate.Limit(float64(rl.PerMinute)/60), rl.Burst)
		}
		l.buckets[bucketKey{caller, tool}] = b
	}
	return b
}

// allow takes one token from the caller's bucket of tool. When none is left
// it reports how long until one is.
func (l *limiters) allow(caller, tool string, now time.Time) (bool, time.Duration) {
	b := l.get(caller, tool)
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

// state reports the caller's bucket of tool at now; ok is false when the
// tool is not limited.
func (l *limiters) state(caller, tool string, now time.Time) (limitState, bool) {
	b := l.get(caller, tool)
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
