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

// globalCaller names the bucket all callers of a tool share when the tool
// has a global ceiling; no API key can have this name.
const globalCaller = "\x00global"

// allow takes one token from the caller's bucket of tool and, when the tool
// has a global ceiling, one from the bucket all callers share. When either
// is empty it takes none and reports how long until a call may pass.
func (l *limiters) allow(caller, tool string, now time.Time) (bool, time.Duration) {
	own, ok, wait := take(l.get(caller, tool), now)
	if !ok {
		return false, wait
	}
	_, ok, wait = take(l.global(tool), now)
	if !ok && own != nil {
		own.CancelAt(now)
	}
	return ok, wait
}

// take reserves a token of b; a nil reservation means b is not limited.
func take(b *bucket, now time.Time) (*rate.Reservation, bool, time.Duration) {
	if b == nil || b.lim == nil {
		return nil, true, 0
	}
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return nil, false, time.Minute
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, false, d
	}
	return r, true, 0
}

// global returns the shared bucket of tool, nil when it has no ceiling.
func (l *limiters) global(tool string) *bucket {
	rl := l.cfg(tool)
	if rl.Global <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := bucketKey{globalCaller, tool}
	b, ok := l.buckets[k]
	if !ok {
		b = &bucket{perMinute: rl.Global, burst: rl.Global, lim: rate.NewLimiter(rate.Limit(float64(rl.Global)/60), rl.Global)}
		l.buckets[k] = b
	}
	return b
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
