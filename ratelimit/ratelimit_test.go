package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// newDatabase returns the URL of a fresh migrated database, which holds
// the buckets' table.
func newDatabase(t testing.TB) string {
	t.Helper()
	return pgtest.NewDatabase(t)
}

// openPool opens a pool on u, closed when the test ends: one replica's.
func openPool(t testing.TB, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// replicas returns n limiters on one database, each with its own pool, as
// n replicas of the server have.
func replicas(t testing.TB, u string, n int, opts Options) []*Limiter {
	t.Helper()
	var ls []*Limiter
	for range n {
		ls = append(ls, New(openPool(t, u), opts))
	}
	return ls
}

func TestReplicasShareOneBudget(t *testing.T) {
	u := newDatabase(t)
	// One token a minute: no refill during the test, however slow the
	// machine, so exactly the burst passes.
	lim := Limit{PerMinute: 1, Burst: 5}
	tests := []struct {
		name       string
		concurrent bool
	}{
		{"calls in turn", false},
		{"calls at once", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := replicas(t, u, 2, Options{Timeout: 5 * time.Second})
			key := fmt.Sprintf("web_search:key-%d", i)
			var mu sync.Mutex
			var allowed int
			var remaining []int
			call := func(n int) {
				d, err := rs[n%2].Take(context.Background(), Bucket{Key: key, Limit: lim})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Degraded {
					t.Error("decision degraded with the database up")
				}
				mu.Lock()
				defer mu.Unlock()
				if d.Allowed {
					allowed++
					remaining = append(remaining, d.States[0].Remaining)
				} else if d.RetryAfter <= 0 || d.RetryAfter > time.Minute {
					t.Errorf("refused call told to retry after %s, want up to a minute", d.RetryAfter)
				}
			}
			if tt.concurrent {
				var wg sync.WaitGroup
				for n := range 20 {
					wg.Go(func() { call(n) })
				}
				wg.Wait()
			} else {
				for n := range 20 {
					call(n)
				}
			}
			if allowed != lim.Burst {
				t.Errorf("%d of 20 calls through two replicas allowed, want the burst, %d", allowed, lim.Burst)
			}
			slices.Sort(remaining)
			if want := []int{0, 1, 2, 3, 4}; !slices.Equal(remaining, want) {
				t.Errorf("remaining tokens after the allowed calls %v, want %v", remaining, want)
			}
		})
	}
}

func TestRefill(t *testing.T) {
	u := newDatabase(t)
	rs := replicas(t, u, 2, Options{Timeout: 5 * time.Second})
	admin := openPool(t, u)
	ctx := context.Background()

	// Refill by elapsed time, computed by the database: the bucket's
	// clock is moved back instead of waiting. One token a minute.
	b := Bucket{Key: "search_docs:k", Limit: Limit{PerMinute: 1, Burst: 2}}
	for i := range 2 {
		if d, err := rs[i].Take(ctx, b); err != nil || !d.Allowed {
			t.Fatalf("call %d of the burst: %+v, %v", i+1, d, err)
		}
	}
	// The database's clock and this process's are the machine's: the
	// update happens after before, the call's answer comes before after.
	// The microsecond allows for the database's rounding of now().
	before := time.Now().Add(-time.Microsecond)
	if _, err := admin.Exec(ctx, `UPDATE rate_limit_buckets SET tokens = 0.5, updated_at = now() WHERE key = $1`, b.Key); err != nil {
		t.Fatal(err)
	}
	d, err := rs[0].Take(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Microsecond)
	if d.Allowed {
		t.Fatal("a call on half a token was allowed")
	}
	// Half a token at one a minute: 30s, less the time since the update.
	if took := after.Sub(before); d.RetryAfter < 30*time.Second-took || d.RetryAfter > 30*time.Second {
		t.Errorf("retry after %s, want 30s less at most the %s the update and the call took", d.RetryAfter, took)
	}
	// Full again 1.5 minutes after the update.
	if s := d.States[0]; s.Limit != 1 || s.Remaining != 0 || s.Reset.Before(before.Add(90*time.Second)) || s.Reset.After(after.Add(90*time.Second)) {
		t.Errorf("state %+v, want limit 1, nothing remaining, full again 1.5 minutes after the update (between %s and %s)",
			s, before.Add(90*time.Second).Format(time.StampMicro), after.Add(90*time.Second).Format(time.StampMicro))
	}
	if _, err := admin.Exec(ctx, `UPDATE rate_limit_buckets SET updated_at = updated_at - interval '30 seconds' WHERE key = $1`, b.Key); err != nil {
		t.Fatal(err)
	}
	d, err = rs[1].Take(ctx, b)
	if err != nil || !d.Allowed || d.States[0].Remaining != 0 {
		t.Fatalf("call after 30s refilled half a token: %+v, %v; want allowed, nothing left", d, err)
	}

	// In real time, across replicas: a refused call passes once it has
	// waited what it was told. A token every 500ms: two calls in turn come
	// closer than that even on a loaded machine.
	fast := Bucket{Key: "web_search:k", Limit: Limit{PerMinute: 120, Burst: 1}}
	refused := 0
	for i := 0; refused < 3 && i < 100; i++ {
		d, err := rs[i%2].Take(ctx, fast)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			continue
		}
		refused++
		if d.RetryAfter <= 0 || d.RetryAfter > 500*time.Millisecond {
			t.Fatalf("retry after %s, want within the 500ms a token takes", d.RetryAfter)
		}
		time.Sleep(d.RetryAfter)
		if d, err := rs[(i+1)%2].Take(ctx, fast); err != nil || !d.Allowed {
			t.Fatalf("call after waiting RetryAfter on the other replica: %+v, %v", d, err)
		}
	}
	if refused == 0 {
		t.Error("100 quick calls on a bucket of one token never refused")
	}
}

// TestSharedCeilingTakesAllOrNothing: a call the tool's shared bucket
// refuses takes nothing from the caller's own bucket.
func TestSharedCeilingTakesAllOrNothing(t *testing.T) {
	u := newDatabase(t)
	l := New(openPool(t, u), Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	own := Limit{PerMinute: 60, Burst: 5}
	shared := Limit{PerMinute: 1}
	if d, err := l.Allow(ctx, "alice", "web_search", own, shared); err != nil || !d.Allowed {
		t.Fatalf("first call: %+v, %v", d, err)
	}
	d, err := l.Allow(ctx, "bob", "web_search", own, shared)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed {
		t.Fatal("the shared bucket of one token let a second caller through")
	}
	if len(d.States) != 2 || d.States[0].Remaining != 5 || d.States[1].Remaining != 0 {
		t.Errorf("states %+v, want bob's own bucket full (5) and the shared one empty", d.States)
	}
	var tokens float64
	if err := openPool(t, u).QueryRow(ctx, `SELECT tokens FROM rate_limit_buckets WHERE key = 'web_search:bob'`).Scan(&tokens); err != nil {
		t.Fatal(err)
	}
	if tokens != 5 {
		t.Errorf("bob's bucket holds %v tokens after a refused call, want 5", tokens)
	}
	if _, err := l.Allow(ctx, "bob", "web:search", own, shared); err == nil {
		t.Error("a tool name with a colon was accepted")
	}
}

func TestUnlimitedBucketsNeedNoDatabase(t *testing.T) {
	l := New(nil, Options{})
	d, err := l.Take(context.Background(), Bucket{Key: "a", Limit: Limit{PerMinute: 0, Burst: 5}})
	if err != nil || !d.Allowed || d.Degraded || len(d.States) != 0 {
		t.Errorf("got %+v, %v; want allowed without the database", d, err)
	}
}

// downURL returns a URL of the test server's database on a port that
// refuses connections for the rest of the test.
func downURL(t *testing.T) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=1", cfg.User, closedport.Reserve(t).Addr(), cfg.Database)
}

func TestDatabaseDown(t *testing.T) {
	lim := Limit{PerMinute: 1, Burst: 5}
	tests := []struct {
		onFailure Failure
		allowed   int
	}{
		{FailLocal, 5},
		{FailOpen, 20},
		{FailClosed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.onFailure.String(), func(t *testing.T) {
			l := New(openPool(t, downURL(t)), Options{OnFailure: tt.onFailure, Cooldown: time.Hour})
			allowed, errs := 0, 0
			start := time.Now()
			for range 20 {
				d, err := l.Take(context.Background(), Bucket{Key: "k", Limit: lim})
				if err != nil {
					errs++
				}
				if !d.Degraded {
					t.Fatalf("decision %+v not degraded with the database down", d)
				}
				if d.Allowed {
					allowed++
				} else if d.RetryAfter <= 0 {
					t.Errorf("refused call without a retry delay: %+v", d)
				}
			}
			if allowed != tt.allowed {
				t.Errorf("%d of 20 calls allowed, want %d", allowed, tt.allowed)
			}
			// The first call finds the database down; the others, in
			// the cooldown, do not ask it.
			if errs != 1 {
				t.Errorf("%d calls returned an error, want the first alone", errs)
			}
			t.Logf("20 calls with the database down took %s", time.Since(start))
		})
	}
}

// TestSlowDatabase holds a bucket's row lock in another transaction: the
// call gives up after the timeout, is decided locally, and the database
// decides again once the cooldown is over.
func TestSlowDatabase(t *testing.T) {
	u := newDatabase(t)
	pool := openPool(t, u)
	ctx := context.Background()
	// Two connections made before the limiter's first call: the timeout
	// then bounds a statement alone, not a connection on a loaded machine,
	// and the call after the one that gave up (whose connection is closed)
	// has the other.
	var conns []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	l := New(pool, Options{Timeout: 500 * time.Millisecond, Cooldown: 10 * time.Millisecond})
	// A token a minute: what comes back is counted from the time the test
	// took.
	b := Bucket{Key: "search_docs:k", Limit: Limit{PerMinute: 1, Burst: 5}}
	start := time.Now()
	if d, err := l.Take(ctx, b); err != nil || !d.Allowed || d.Degraded {
		t.Fatalf("first call: %+v, %v", d, err)
	}

	tx, err := openPool(t, u).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM rate_limit_buckets WHERE key = $1 FOR UPDATE`, b.Key); err != nil {
		t.Fatal(err)
	}
	d, err := l.Take(ctx, b)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call on a locked bucket returned %v, want the deadline exceeded", err)
	}
	if !d.Degraded || !d.Allowed {
		t.Errorf("decision %+v, want allowed by this process's own bucket", d)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	time.Sleep(20 * time.Millisecond)
	d, err = l.Take(ctx, b)
	if err != nil || d.Degraded {
		t.Fatalf("call after the cooldown: %+v, %v; want the database's decision", d, err)
	}
	// The database counted the two calls it decided and, perhaps, the one
	// that gave up: its statement was with the server, waiting for the
	// lock, and may have run once the lock was released.
	if got, most := d.States[0].Remaining, 3+int(time.Since(start)/time.Minute); got < 2 || got > most {
		t.Errorf("remaining %d after two or three calls, want 2 to %d", got, most)
	}
}

func TestPrune(t *testing.T) {
	u := newDatabase(t)
	l := New(openPool(t, u), Options{Timeout: 5 * time.Second})
	ctx := context.Background()
	if _, err := l.Take(ctx, Bucket{Key: "old", Limit: Limit{PerMinute: 60, Burst: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := openPool(t, u).Exec(ctx, `UPDATE rate_limit_buckets SET updated_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx, Bucket{Key: "new", Limit: Limit{PerMinute: 60, Burst: 1}}); err != nil {
		t.Fatal(err)
	}
	n, err := l.Prune(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("pruned %d buckets, want the one idle for two hours", n)
	}
	// A pruned bucket is full again.
	if d, err := l.Take(ctx, Bucket{Key: "old", Limit: Limit{PerMinute: 60, Burst: 1}}); err != nil || !d.Allowed {
		t.Errorf("pruned bucket: %+v, %v; want a full bucket", d, err)
	}
}

func TestPruneEvery(t *testing.T) {
	u := newDatabase(t)
	pool := openPool(t, u)
	l := New(pool, Options{Timeout: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	bucket := func(key string) {
		t.Helper()
		if _, err := l.Take(ctx, Bucket{Key: key, Limit: Limit{PerMinute: 60, Burst: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	bucket("gone")
	bucket("kept")
	if _, err := pool.Exec(ctx, `UPDATE rate_limit_buckets SET updated_at = now() - interval '2 hours' WHERE key = 'gone'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.PruneEvery(ctx, 10*time.Millisecond, time.Hour, func(err error) { t.Errorf("prune: %v", err) })
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var keys []string
		rows, err := pool.Query(ctx, `SELECT key FROM rate_limit_buckets ORDER BY key`)
		if err == nil {
			keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(keys, []string{"kept"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("buckets after 30 s of pruning: %q; want the one in use alone", keys)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("PruneEvery did not return when its context ended")
	}
}

func TestParseFailure(t *testing.T) {
	for _, f := range []Failure{FailLocal, FailOpen, FailClosed} {
		got, err := ParseFailure(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFailure(%q) = %v, %v", f.String(), got, err)
		}
	}
	if _, err := ParseFailure("sometimes"); err == nil {
		t.Error("ParseFailure accepted an unknown behaviour")
	}
}

func TestLimitedBuckets(t *testing.T) {
	bs, order := limited([]Bucket{
		{Key: "z", Limit: Limit{PerMinute: 5, Burst: 0}},
		{Key: "off", Limit: Limit{PerMinute: 0, Burst: 9}},
		{Key: "a", Limit: Limit{PerMinute: 5, Burst: 3}},
		{Key: "z", Limit: Limit{PerMinute: 7, Burst: 7}},
	})
	want := []Bucket{{Key: "a", Limit: Limit{PerMinute: 5, Burst: 3}}, {Key: "z", Limit: Limit{PerMinute: 5, Burst: 1}}}
	if !slices.Equal(bs, want) {
		t.Errorf("limited buckets %v, want %v", bs, want)
	}
	// z was named first: its state comes first in a Decision.
	if !slices.Equal(order, []int{1, 0}) {
		t.Errorf("state order %v, want [1 0]", order)
	}
}

// TestTable checks the table the migrations make: unlogged, with room on
// each page for HOT updates, and, on a Citus cluster, a table of the
// coordinator alone, not distributed.
func TestTable(t *testing.T) {
	pool := openPool(t, newDatabase(t))
	ctx := context.Background()
	var persistence string
	var options []string
	if err := pool.QueryRow(ctx, `SELECT relpersistence::text, coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'rate_limit_buckets'::regclass`).Scan(&persistence, &options); err != nil {
		t.Fatal(err)
	}
	if persistence != "u" || !slices.Contains(options, "fillfactor=50") {
		t.Errorf("rate_limit_buckets: persistence %q, options %v; want unlogged (u) with fillfactor=50", persistence, options)
	}
	var citus bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('pg_dist_partition') IS NOT NULL`).Scan(&citus); err != nil {
		t.Fatal(err)
	}
	if !citus {
		return
	}
	var distributed bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'rate_limit_buckets'::regclass)`).Scan(&distributed); err != nil {
		t.Fatal(err)
	}
	if distributed {
		t.Error("rate_limit_buckets is a Citus table; it should stay a plain table of the coordinator")
	}
}
