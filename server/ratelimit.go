package server

import (
	"context"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/ratelimit"
)

// limiter decides whether a tool call may run. It takes one token from the
// caller's bucket of the tool and, when the tool has a global ceiling, one
// from the bucket all its callers share, or from neither: both are decided
// together, so a call the ceiling refuses costs the caller nothing.
//
// A caller is an API key or the subject of an access token (identity.bucket);
// without either (stdio, where each client runs its own process, or a
// loopback listener) all callers share the tool's bucket.
// memoryLimiter keeps the buckets in this process; sharedLimiter keeps them
// in PostgreSQL, so that every replica spends from one budget per key and
// tool.
type limiter interface {
	// take decides one call of tool by caller. Its error reports that ctx
	// ended before a decision; a store that fails is not an error but a
	// fallback decision.
	take(ctx context.Context, caller, tool string) (limitDecision, error)
}

// limitDecision is a limiter's answer for one call.
type limitDecision struct {
	allowed bool
	// wait is, for a refused call, how long until every bucket it needs
	// holds a token.
	wait time.Duration
	// own is the caller's bucket of the tool after the call, for the
	// X-RateLimit-* headers; limited is false when the tool has no
	// per-caller limit (own is then empty).
	own     limitState
	limited bool
	// fallback reports a call the shared store did not decide, because the
	// database failed or did not answer in time: MCP_rate_limit_on_db_failure
	// decided it.
	fallback bool
	// unchecked reports a fallback refusal made without reading any bucket
	// (MCP_rate_limit_on_db_failure closed).
	unchecked bool
	// cause is why the store did not decide, for the log; nil while the
	// database is left alone after a failure.
	cause error
}

// limitState is what the X-RateLimit-* headers report.
type limitState struct {
	Limit     int
	Remaining int
	Reset     time.Time
}

// playgroundBudget prefixes the tool of the calls of the web page's
// search playground in the buckets' names: they spend a budget of their
// own (MCP_ui_search_per_minute), apart from the agents' buckets of the
// tool, so that neither empties the other's.
const playgroundBudget = "ui:"

// budgetOf names the buckets a call spends from: its tool's, or for a
// call of the web page, the playground's.
func budgetOf(c *call) string {
	if c.Transport == uiTransport {
		return playgroundBudget + c.Tool
	}
	return c.Tool
}

// limitFor is the bucket of budget, a tool or the playground's use of one
// (budgetOf). The playground has no ceiling for all callers: its budget
// is per person, and small.
func (s *Server) limitFor(budget string) config.RateLimit {
	if _, ok := strings.CutPrefix(budget, playgroundBudget); ok {
		return config.RateLimit{PerMinute: s.cfg.UISearch.PerMinute, Burst: s.cfg.UISearch.Burst}
	}
	return s.cfg.RateLimitFor(budget)
}

// memoryLimiter keeps one token bucket per caller and tool in this
// process: one tenant's calls never spend another's tokens.
type memoryLimiter struct {
	mu      sync.Mutex
	cfg     func(tool string) config.RateLimit
	now     func() time.Time
	buckets map[bucketKey]*bucket
}

// bucketKey names one bucket. Callers are the configured API keys' names
// and the subjects of access tokens, so the map is bounded by (keys +
// people) × tools.
type bucketKey struct{ caller, tool string }

type bucket struct {
	perMinute int
	burst     int
	lim       *rate.Limiter
}

func newMemoryLimiter(cfg func(tool string) config.RateLimit, now func() time.Time) *memoryLimiter {
	return &memoryLimiter{cfg: cfg, now: now, buckets: map[bucketKey]*bucket{}}
}

// globalCaller names the bucket all callers of a tool share when the tool
// has a global ceiling; no API key can have this name.
const globalCaller = "\x00global"

func (l *memoryLimiter) take(_ context.Context, caller, tool string) (limitDecision, error) {
	now := l.now()
	rl := l.cfg(tool)
	own := l.get(bucketKey{caller, tool}, rl.PerMinute, rl.Burst)
	var global *bucket
	if rl.Global > 0 {
		global = l.get(bucketKey{globalCaller, tool}, rl.Global, rl.Global)
	}
	d := limitDecision{allowed: true}
	r, ok, wait := reserve(own, now)
	if !ok {
		d.allowed, d.wait = false, wait
	} else if _, ok, wait := reserve(global, now); !ok {
		if r != nil {
			r.CancelAt(now)
		}
		d.allowed, d.wait = false, wait
	}
	if own.lim != nil {
		d.own, d.limited = own.state(now), true
	}
	return d, nil
}

// get returns the bucket of k, made on first use.
func (l *memoryLimiter) get(k bucketKey, perMinute, burst int) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[k]
	if !ok {
		b = &bucket{perMinute: perMinute, burst: burst}
		if perMinute > 0 {
			b.lim = rate.NewLimiter(rate.Limit(float64(perMinute)/60), burst)
		}
		l.buckets[k] = b
	}
	return b
}

// reserve takes a token of b; a nil reservation means b is not limited.
func reserve(b *bucket, now time.Time) (*rate.Reservation, bool, time.Duration) {
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

// state reports a limited bucket at now.
func (b *bucket) state(now time.Time) limitState {
	tokens := b.lim.TokensAt(now)
	missing := float64(b.burst) - tokens
	reset := now
	if missing > 0 {
		reset = now.Add(time.Duration(missing / (float64(b.perMinute) / 60) * float64(time.Second)))
	}
	return limitState{Limit: b.perMinute, Remaining: max(int(math.Floor(tokens)), 0), Reset: reset}
}

// sharedLimiter keeps the buckets in PostgreSQL (package ratelimit): N
// replicas on one database let through what one would, within the burst.
// Each call is one round trip that decides the caller's bucket and the
// tool's ceiling together.
type sharedLimiter struct {
	lim *ratelimit.Limiter
	cfg func(tool string) config.RateLimit
}

func (l *sharedLimiter) take(ctx context.Context, caller, tool string) (limitDecision, error) {
	rl := l.cfg(tool)
	own := ratelimit.Limit{PerMinute: rl.PerMinute, Burst: rl.Burst}
	d, err := l.lim.Allow(ctx, caller, tool, own, ratelimit.Limit{PerMinute: rl.Global})
	if err != nil && !d.Degraded {
		return limitDecision{}, err
	}
	out := limitDecision{allowed: d.Allowed, wait: d.RetryAfter, fallback: d.Degraded, cause: err,
		unchecked: d.Degraded && !d.Allowed && len(d.States) == 0}
	// The decision's states follow the buckets as given, the unlimited
	// left out: the caller's comes first when it is limited. Open and
	// closed fallbacks report none.
	if rl.PerMinute > 0 && len(d.States) > 0 {
		st := d.States[0]
		out.own, out.limited = limitState{Limit: st.Limit, Remaining: st.Remaining, Reset: st.Reset}, true
	}
	return out, nil
}
