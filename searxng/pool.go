package searxng

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults of PoolOptions.
const (
	// DefaultMinBackoff is how long an instance is skipped after its first
	// failure in a row; each further failure doubles it.
	DefaultMinBackoff = 30 * time.Second
	// DefaultMaxBackoff bounds the doubling.
	DefaultMaxBackoff = 5 * time.Minute
)

// PoolOptions configure a Pool. Zero fields take their defaults.
type PoolOptions struct {
	// MinBackoff and MaxBackoff bound how long a failing instance is moved
	// to the end of the order (default DefaultMinBackoff and
	// DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Logger receives one warning per failed attempt, naming the instance
	// and the cause (default: discard).
	Logger *slog.Logger
}

// Pool spreads searches over several SearXNG instances for availability.
// It tries them in the configured order, healthy ones first; when an
// instance is unreachable, times out, rate limits (429), answers 5xx or
// another error status (403 included: its JSON format may be disabled on
// that instance only), or sends an unusable answer, the next one is tried
// within the caller's deadline. A failed instance is skipped — moved behind
// the healthy ones — for MinBackoff, doubling with each failure in a row up
// to MaxBackoff, and restored by its next success. An invalid request (400,
// or one that fails validation) is not retried elsewhere: every instance
// would reject it. It is safe for concurrent use.
type Pool struct {
	instances []*instance
	minOff    time.Duration
	maxOff    time.Duration
	log       *slog.Logger
	now       func() time.Time

	mu sync.Mutex // guards the health fields of every instance
}

type instance struct {
	client *Client

	failuresInRow int
	skipUntil     time.Time
	lastClass     string
	lastErrorAt   time.Time
	successes     uint64
	failures      uint64
	lastPing      error
	pinged        bool
}

// NewPool returns a Pool over the instances at baseURLs, in order of
// preference; opts configure each instance's Client (timeout, user agent,
// ...). Blank entries are ignored; at least one URL is required.
func NewPool(baseURLs []string, po PoolOptions, opts ...Option) (*Pool, error) {
	p := &Pool{minOff: po.MinBackoff, maxOff: po.MaxBackoff, log: po.Logger, now: time.Now}
	if p.minOff <= 0 {
		p.minOff = DefaultMinBackoff
	}
	if p.maxOff <= 0 {
		p.maxOff = DefaultMaxBackoff
	}
	p.maxOff = max(p.maxOff, p.minOff)
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	for _, u := range baseURLs {
		if u == "" || isBlank(u) {
			continue
		}
		c, err := New(u, opts...)
		if err != nil {
			return nil, err
		}
		if seen[c.searchURL] {
			return nil, fmt.Errorf("searxng: instance %s is listed twice", c.display)
		}
		seen[c.searchURL] = true
		p.instances = append(p.instances, &instance{client: c})
	}
	if len(p.instances) == 0 {
		return nil, errors.New("searxng: no instance URL given")
	}
	return p, nil
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// order returns the instances to try: those not skipped in configured
// order, then the skipped ones, soonest restored first.
func (p *Pool) order() []*instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	healthy := make([]*instance, 0, len(p.instances))
	var skipped []*instance
	for _, in := range p.instances {
		if now.Before(in.skipUntil) {
			skipped = append(skipped, in)
			continue
		}
		healthy = append(healthy, in)
	}
	// Insertion sort: a handful of instances at most.
	for i := 1; i < len(skipped); i++ {
		for j := i; j > 0 && skipped[j].skipUntil.Before(skipped[j-1].skipUntil); j-- {
			skipped[j], skipped[j-1] = skipped[j-1], skipped[j]
		}
	}
	return append(healthy, skipped...)
}

func (p *Pool) succeeded(in *instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	in.successes++
	in.failuresInRow = 0
	in.skipUntil = time.Time{}
}

func (p *Pool) failed(in *instance, err error) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	in.failures++
	in.failuresInRow++
	in.lastClass = ErrorClass(err)
	in.lastErrorAt = now
	off := p.minOff
	for i := 1; i < in.failuresInRow && off < p.maxOff; i++ {
		off *= 2
	}
	off = min(off, p.maxOff)
	in.skipUntil = now.Add(off)
	return off
}

// failsOver reports whether an error of one instance should send the search
// to the next.
func failsOver(err error) bool {
	return !errors.Is(err, ErrBadRequest) && !errors.Is(err, context.Canceled)
}

// Search runs the search on the first instance that answers it. With one
// instance its error is returned as is; when several were tried, their
// errors are joined under a message saying how many failed, so errors.Is
// matches each one's sentinel and Retryable is true when any failure was
// transient.
//
// Each attempt but the last gets at most half of the time left before ctx's
// deadline (and at most the Client's timeout), so that a hanging instance
// leaves time for the next one.
func (p *Pool) Search(ctx context.Context, r Request) (*Response, error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("searxng: %w: %v", ErrBadRequest, err)
	}
	order := p.order()
	var errs []error
	for i, in := range order {
		attemptCtx, cancel := attemptContext(ctx, len(order)-i)
		resp, err := in.client.Search(attemptCtx, r)
		cancel()
		if err == nil {
			p.succeeded(in)
			return resp, nil
		}
		if ctx.Err() != nil {
			// The caller gave up or ran out of time: not the instance's
			// fault, and no time is left for another.
			errs = append(errs, err)
			break
		}
		if !failsOver(err) {
			return nil, err
		}
		off := p.failed(in, err)
		p.log.WarnContext(ctx, "searxng instance failed", "instance", in.client.display, "class", ErrorClass(err),
			"err", err, "skipped_for", off, "remaining", len(order)-i-1)
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, &poolError{tried: len(errs), total: len(order), errs: errs}
}

// attemptContext bounds one attempt when more instances remain to be tried.
func attemptContext(ctx context.Context, remaining int) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || remaining <= 1 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Until(deadline)/2)
}

// poolError is the error of a search that failed on several instances.
type poolError struct {
	tried, total int
	errs         []error
}

func (e *poolError) Error() string {
	msg := fmt.Sprintf("searxng: the search failed on %d of %d search instances", e.tried, e.total)
	for i, err := range e.errs {
		msg += fmt.Sprintf("; instance %d: %v", i+1, err)
	}
	return msg
}

func (e *poolError) Unwrap() []error { return e.errs }

// Ping checks every instance at once, for a readiness probe, and records
// each result for Instances. It succeeds when at least one instance
// answers. Probes do not change which instances searches skip: an instance
// whose limiter refuses searches may still answer its health endpoint.
func (p *Pool) Ping(ctx context.Context) error {
	errs := make([]error, len(p.instances))
	var wg sync.WaitGroup
	for i, in := range p.instances {
		wg.Go(func() { errs[i] = in.client.Ping(ctx) })
	}
	wg.Wait()
	p.mu.Lock()
	for i, in := range p.instances {
		in.lastPing, in.pinged = errs[i], true
	}
	p.mu.Unlock()
	var failed []error
	for _, err := range errs {
		if err == nil {
			return nil
		}
		failed = append(failed, err)
	}
	if len(failed) == 1 {
		return failed[0]
	}
	return &poolError{tried: len(failed), total: len(p.instances), errs: failed}
}

// InstanceStatus describes one instance of a Pool, for readiness and
// metrics endpoints.
type InstanceStatus struct {
	// URL is the instance's base URL with any password redacted. It is
	// meant for operators, not for models.
	URL string `json:"url"`
	// Healthy is false while searches skip the instance after failures.
	Healthy bool `json:"healthy"`
	// SkippedUntil is when the instance is tried first again; zero when
	// healthy.
	SkippedUntil time.Time `json:"skipped_until,omitzero"`
	// ConsecutiveFailures counts search failures since the last success.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// LastError is the class (see ErrorClass) of the last search failure,
	// "" when none; LastErrorAt is when it happened.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Successes and Failures count searches answered and failed.
	Successes uint64 `json:"successes"`
	Failures  uint64 `json:"failures"`
	// Reachable reports the last Ping of the instance; nil before the first.
	Reachable *bool `json:"reachable,omitempty"`
	// PingError is the class of the last Ping's failure, "" when it
	// succeeded.
	PingError string `json:"ping_error,omitempty"`
}

// Instances returns the status of every instance in configured order.
func (p *Pool) Instances() []InstanceStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	out := make([]InstanceStatus, 0, len(p.instances))
	for _, in := range p.instances {
		s := InstanceStatus{
			URL:                 in.client.display,
			Healthy:             !now.Before(in.skipUntil),
			ConsecutiveFailures: in.failuresInRow,
			LastError:           in.lastClass,
			LastErrorAt:         in.lastErrorAt,
			Successes:           in.successes,
			Failures:            in.failures,
		}
		if !s.Healthy {
			s.SkippedUntil = in.skipUntil
		}
		if in.pinged {
			ok := in.lastPing == nil
			s.Reachable = &ok
			s.PingError = ErrorClass(in.lastPing)
		}
		out = append(out, s)
	}
	return out
}
