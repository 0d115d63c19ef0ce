// Package ratelimit keeps token buckets in PostgreSQL, so that every
// replica of the server spends from one budget per bucket: N replicas
// behind one API key let through what one would, within the burst.
//
// A call costs one round trip: one batch, run by the server as one
// implicit transaction, that creates the buckets it names when they have no
// row yet and then, under the rows' locks, refills each bucket by the time
// elapsed since it was last used and takes one token from every bucket, or
// from none when any is empty (a caller's bucket keeps its token when the
// tool's shared ceiling refuses the call). The refill is computed with the
// database's clock, so that replicas whose clocks differ agree.
//
// When the database does not answer within Options.Timeout, or fails, the
// call is decided as Options.OnFailure says: by a bucket of this process
// alone (the default: each replica then enforces the limit on its own, so
// N replicas let through at most N times the budget until the database is
// back), or let through, or refused. After a failure the database is left
// alone for Options.Cooldown, so that an outage does not add the timeout to
// every call.
//
// The table, rate_limit_buckets, is created by the migration
// 012_rate_limit_buckets.sql (package migrations), which describes it.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/time/rate"
)

// Limit is a token bucket's rule.
type Limit struct {
	// PerMinute tokens are added each minute, continuously. 0 or less
	// means no limit.
	PerMinute int
	// Burst is the most tokens the bucket holds, and what a new bucket
	// starts with. Values below 1 count as 1.
	Burst int
}

// Bucket is one bucket a call takes a token from: its key, any string that
// names it for every replica alike, and its rule.
type Bucket struct {
	Key   string
	Limit Limit
}

// State is a bucket after a call, as the X-RateLimit-* headers report it.
type State struct {
	// Limit is the bucket's PerMinute.
	Limit int
	// Remaining is the whole tokens left.
	Remaining int
	// Reset is when the bucket will be full again.
	Reset time.Time
}

// Decision is the outcome of one call.
type Decision struct {
	// Allowed reports whether the call may run: a token was taken from
	// every bucket.
	Allowed bool
	// RetryAfter is, for a refused call, how long until every bucket holds
	// a token.
	RetryAfter time.Duration
	// States are the limited buckets after the call, in the order given
	// (buckets without a limit are left out).
	States []State
	// Degraded reports that the database did not decide: OnFailure did.
	Degraded bool
}

// Failure is how calls are decided when the database cannot decide them.
type Failure int

const (
	// FailLocal decides by buckets of this process alone: each replica
	// enforces every limit on its own.
	FailLocal Failure = iota
	// FailOpen lets every call through.
	FailOpen
	// FailClosed refuses every call.
	FailClosed
)

// String returns the name ParseFailure reads.
func (f Failure) String() string {
	switch f {
	case FailLocal:
		return "local"
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// ParseFailure reads "local", "open" or "closed".
func ParseFailure(s string) (Failure, error) {
	for _, f := range []Failure{FailLocal, FailOpen, FailClosed} {
		if s == f.String() {
			return f, nil
		}
	}
	return 0, fmt.Errorf("ratelimit: unknown failure behaviour %q: want local, open or closed", s)
}

// Options tune a Limiter; the zero value is the default.
type Options struct {
	// Timeout bounds the database's answer to one call, a new
	// connection's set-up included. Default 250ms. A call that gives up
	// may still take its token: its statement can run once whatever held
	// it up is gone.
	Timeout time.Duration
	// OnFailure decides the calls the database does not. Default
	// FailLocal.
	OnFailure Failure
	// Cooldown is how long calls are decided without the database after
	// it failed one. Default 1s.
	Cooldown time.Duration
}

// Defaults of Options.
const (
	DefaultTimeout  = 250 * time.Millisecond
	DefaultCooldown = time.Second
)

// closedRetry is what a call refused by FailClosed is told to wait.
const closedRetry = time.Second

// DB is what a Limiter needs of PostgreSQL: a *pgxpool.Pool or a *pgx.Conn
// (used by one goroutine at a time).
type DB interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Limiter takes tokens from buckets kept in the database. It is safe for
// concurrent use.
type Limiter struct {
	db   DB
	opts Options
	// downUntil is when, in Unix nanoseconds, the database is asked again
	// after a failure.
	downUntil atomic.Int64
	local     localBuckets
}

// New returns a Limiter keeping its buckets in db, a database migrated
// by package migrations.
func New(db DB, opts Options) *Limiter {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Cooldown <= 0 {
		opts.Cooldown = DefaultCooldown
	}
	return &Limiter{db: db, opts: opts, local: localBuckets{m: map[string]*localBucket{}}}
}

// Allow takes a token from caller's bucket of tool, limited by own, and
// from the bucket every caller of tool shares, limited by shared (whose
// Burst is its PerMinute when not set), or from neither. It is Take with
// the keys "tool:caller" and "tool"; tool must not hold a colon, so that
// the two never meet.
func (l *Limiter) Allow(ctx context.Context, caller, tool string, own, shared Limit) (Decision, error) {
	if strings.Contains(tool, ":") {
		return Decision{}, fmt.Errorf("ratelimit: tool name %q holds a colon", tool)
	}
	if shared.Burst <= 0 {
		shared.Burst = shared.PerMinute
	}
	return l.Take(ctx, Bucket{Key: tool + ":" + caller, Limit: own}, Bucket{Key: tool, Limit: shared})
}

// Take takes a token from every limited bucket, or from none when any is
// empty. A bucket named twice counts once.
//
// A non-nil error reports that the database failed or did not answer in
// time: the Decision is then OnFailure's, usable as any other, with
// Degraded set; the error is for the caller's logs. While the database is
// left alone after a failure (Options.Cooldown) decisions are Degraded too,
// without an error.
func (l *Limiter) Take(ctx context.Context, buckets ...Bucket) (Decision, error) {
	bs, order := limited(buckets)
	if len(bs) == 0 {
		return Decision{Allowed: true}, nil
	}
	if time.Now().UnixNano() < l.downUntil.Load() {
		return l.fallback(bs, order), nil
	}
	tctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	d, err := l.take(tctx, bs, order)
	if err == nil {
		return d, nil
	}
	if ctx.Err() != nil {
		// The caller gave up: that says nothing of the database.
		return Decision{}, fmt.Errorf("ratelimit: %w", ctx.Err())
	}
	l.downUntil.Store(time.Now().Add(l.opts.Cooldown).UnixNano())
	return l.fallback(bs, order), fmt.Errorf("ratelimit: database did not decide, deciding %s for %s: %w", l.opts.OnFailure, l.opts.Cooldown, err)
}

// limited returns the limited buckets of bs sorted by key, without
// repeats, with Burst at least 1, and for each the index of its State in a
// Decision (the order of first mention in bs).
func limited(bs []Bucket) ([]Bucket, []int) {
	var out []Bucket
	for _, b := range bs {
		if b.Limit.PerMinute <= 0 || slices.ContainsFunc(out, func(o Bucket) bool { return o.Key == b.Key }) {
			continue
		}
		b.Limit.Burst = max(b.Limit.Burst, 1)
		out = append(out, b)
	}
	// Sorted, every call locks rows in the same order: no deadlock
	// between calls naming the same buckets.
	pos := make(map[string]int, len(out))
	for i, b := range out {
		pos[b.Key] = i
	}
	slices.SortFunc(out, func(a, b Bucket) int { return strings.Compare(a.Key, b.Key) })
	order := make([]int, len(out))
	for i, b := range out {
		order[i] = pos[b.Key]
	}
	return out, order
}

// ensureSQL gives every named bucket a row, full, unless it has one.
const ensureSQL = `
	INSERT INTO rate_limit_buckets (key, tokens, updated_at)
	SELECT key, burst, now() FROM unnest($1::text[], $2::float8[]) AS r(key, burst)
	ON CONFLICT (key) DO NOTHING`

// takeSQL locks the named buckets in key order, refills them by the time
// since their last use, and takes a token from each when every one has
// one. It returns each bucket's tokens after the call and the decision. A
// refused call writes nothing.
const takeSQL = `
	WITH r AS (
		SELECT * FROM unnest($1::text[], $2::float8[], $3::float8[]) AS r(key, rate, burst)
	), s AS (
		SELECT b.key, r.rate, r.burst,
		       least(r.burst, b.tokens + r.rate * greatest(extract(epoch FROM now() - b.updated_at)::float8, 0)) AS avail
		FROM rate_limit_buckets b JOIN r ON r.key = b.key
		ORDER BY b.key
		FOR UPDATE OF b
	), d AS (
		SELECT count(*) = cardinality($1::text[]) AND bool_and(avail >= 1) AS ok FROM s
	), u AS (
		UPDATE rate_limit_buckets b
		SET tokens = s.avail - 1, updated_at = greatest(b.updated_at, now())
		FROM s, d
		WHERE d.ok AND b.key = s.key
	)
	SELECT s.key, s.avail - CASE WHEN d.ok THEN 1 ELSE 0 END, d.ok
	FROM s, d`

// take asks the database, in one round trip.
func (l *Limiter) take(ctx context.Context, bs []Bucket, order []int) (Decision, error) {
	keys := make([]string, len(bs))
	rates := make([]float64, len(bs))
	bursts := make([]float64, len(bs))
	for i, b := range bs {
		keys[i], rates[i], bursts[i] = b.Key, perSecond(b.Limit), float64(b.Limit.Burst)
	}
	// A bucket's row pruned between the two statements (see Prune) is
	// created again by one more try.
	for range 2 {
		batch := &pgx.Batch{}
		batch.Queue(ensureSQL, keys, bursts)
		batch.Queue(takeSQL, keys, rates, bursts)
		br := l.db.SendBatch(ctx, batch)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return Decision{}, err
		}
		rows, err := br.Query()
		if err != nil {
			br.Close()
			return Decision{}, err
		}
		tokens := make(map[string]float64, len(bs))
		ok := false
		for rows.Next() {
			var key string
			var t float64
			if err := rows.Scan(&key, &t, &ok); err != nil {
				rows.Close()
				br.Close()
				return Decision{}, err
			}
			tokens[key] = t
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			br.Close()
			return Decision{}, err
		}
		if err := br.Close(); err != nil {
			return Decision{}, err
		}
		if len(tokens) < len(bs) {
			continue
		}
		now := time.Now()
		d := Decision{Allowed: ok, States: make([]State, len(bs))}
		for i, b := range bs {
			t := tokens[b.Key]
			d.States[order[i]] = state(b.Limit, t, now)
			if !ok {
				d.RetryAfter = max(d.RetryAfter, wait(b.Limit, t))
			}
		}
		return d, nil
	}
	return Decision{}, errors.New("bucket rows kept disappearing")
}

// perSecond is a limit's refill rate.
func perSecond(l Limit) float64 { return float64(l.PerMinute) / 60 }

// state reports a bucket holding tokens at now.
func state(l Limit, tokens float64, now time.Time) State {
	missing := float64(l.Burst) - tokens
	reset := now
	if missing > 0 {
		reset = now.Add(seconds(missing / perSecond(l)))
	}
	return State{Limit: l.PerMinute, Remaining: max(int(math.Floor(tokens)), 0), Reset: reset}
}

// wait is how long a bucket holding tokens needs to hold one.
func wait(l Limit, tokens float64) time.Duration {
	if tokens >= 1 {
		return 0
	}
	return seconds((1 - tokens) / perSecond(l))
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Ceil(s * float64(time.Second)))
}

// fallback decides a call as OnFailure says.
func (l *Limiter) fallback(bs []Bucket, order []int) Decision {
	switch l.opts.OnFailure {
	case FailOpen:
		return Decision{Allowed: true, Degraded: true}
	case FailClosed:
		return Decision{RetryAfter: closedRetry, Degraded: true}
	}
	d := l.local.take(bs, order, time.Now())
	d.Degraded = true
	return d
}

// Prune deletes the buckets unused for longer than idle, which must be
// longer than any bucket takes to fill (Burst / PerMinute minutes): a
// deleted bucket is full when next used. Rows are few (callers × tools),
// so this only matters when callers come and go.
func (l *Limiter) Prune(ctx context.Context, idle time.Duration) (int64, error) {
	tag, err := l.db.Exec(ctx, `DELETE FROM rate_limit_buckets WHERE updated_at < now() - make_interval(secs => $1)`, idle.Seconds())
	if err != nil {
		return 0, fmt.Errorf("ratelimit: prune: %w", err)
	}
	return tag.RowsAffected(), nil
}

// PruneEvery runs Prune with idle every interval until ctx ends, so that
// the buckets of callers that came and went do not stay for good. Every
// replica may run it: a DELETE of rows nobody uses is cheap and harmless
// twice. A failed round is reported to onError and tried again at the
// next.
func (l *Limiter) PruneEvery(ctx context.Context, interval, idle time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := l.Prune(ctx, idle); err != nil && ctx.Err() == nil {
			onError(err)
		}
	}
}

// localBuckets are the buckets of this process, for FailLocal.
type localBuckets struct {
	mu sync.Mutex
	m  map[string]*localBucket
}

type localBucket struct {
	limit Limit
	lim   *rate.Limiter
}

// take takes a token from every bucket or from none.
func (lb *localBuckets) take(bs []Bucket, order []int, now time.Time) Decision {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	d := Decision{Allowed: true, States: make([]State, len(bs))}
	var taken []*rate.Reservation
	for _, b := range bs {
		r := lb.get(b).ReserveN(now, 1)
		if delay := r.DelayFrom(now); delay > 0 {
			r.CancelAt(now)
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, delay)
			continue
		}
		taken = append(taken, r)
	}
	if !d.Allowed {
		for _, r := range taken {
			r.CancelAt(now)
		}
	}
	for i, b := range bs {
		d.States[order[i]] = state(b.Limit, lb.get(b).TokensAt(now), now)
	}
	return d
}

// get returns the bucket of b, made anew when its limit changed.
func (lb *localBuckets) get(b Bucket) *rate.Limiter {
	x, ok := lb.m[b.Key]
	if !ok || x.limit != b.Limit {
		x = &localBucket{limit: b.Limit, lim: rate.NewLimiter(rate.Limit(perSecond(b.Limit)), b.Limit.Burst)}
		lb.m[b.Key] = x
	}
	return x.lim
}
