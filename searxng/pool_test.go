package searxng

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// clock is a settable time source for backoff tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newPool(t *testing.T, urls []string, opts ...Option) (*Pool, *clock) {
	t.Helper()
	p, err := NewPool(urls, PoolOptions{}, opts...)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	clk := &clock{t: time.Unix(1_000_000, 0)}
	p.now = clk.now
	return p, clk
}

// TestPoolFailover makes the first of two instances fail in each way and
// checks whether the search moves to the second.
func TestPoolFailover(t *testing.T) {
	tests := []struct {
		name     string
		mode     searxngtest.Mode
		down     bool
		delay    time.Duration
		failover bool
		class    string
	}{
		{name: "server error", mode: searxngtest.ServerError, failover: true, class: "server_error"},
		{name: "rate limited", mode: searxngtest.RateLimited, failover: true, class: "rate_limited"},
		{name: "json disabled", mode: searxngtest.FormatDisabled, failover: true, class: "format_disabled"},
		{name: "garbage", mode: searxngtest.Garbage, failover: true, class: "bad_response"},
		{name: "unreachable", down: true, failover: true, class: "unreachable"},
		{name: "timeout", delay: time.Hour, failover: true, class: "timeout"},
		{name: "bad request", mode: searxngtest.BadRequest, failover: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakes := searxngtest.NewN(t, 2)
			fakes[0].SetMode(tt.mode)
			fakes[0].SetDelay(tt.delay)
			urls := searxngtest.URLs(fakes)
			if tt.down {
				urls[0] = fakes[0].URLDown()
			}
			p, _ := newPool(t, urls, WithTimeout(200*time.Millisecond))

			resp, err := p.Search(t.Context(), Request{Query: "failover"})
			if !tt.failover {
				if !errors.Is(err, ErrBadRequest) || fakes[1].Requests() != 0 {
					t.Fatalf("err = %v, second instance asked %d times; want the 400 returned at once", err, fakes[1].Requests())
				}
				if st := p.Instances()[0]; !st.Healthy || st.Failures != 0 {
					t.Errorf("a rejected request counted against the instance: %+v", st)
				}
				return
			}
			if err != nil {
				t.Fatalf("Search: %v", err)
			}
			if len(resp.Results) == 0 || fakes[1].Requests() != 1 {
				t.Fatalf("%d results, second instance asked %d times", len(resp.Results), fakes[1].Requests())
			}
			st := p.Instances()
			if st[0].Healthy || st[0].LastError != tt.class || st[0].Failures != 1 || st[0].ConsecutiveFailures != 1 {
				t.Errorf("first instance status = %+v, want unhealthy with class %s", st[0], tt.class)
			}
			if !st[1].Healthy || st[1].Successes != 1 {
				t.Errorf("second instance status = %+v", st[1])
			}
			// The failed instance is skipped: the next search goes to the
			// second straight away.
			before := fakes[0].Requests()
			if _, err := p.Search(t.Context(), Request{Query: "again"}); err != nil {
				t.Fatal(err)
			}
			if fakes[0].Requests() != before || fakes[1].Requests() != 2 {
				t.Errorf("skipped instance asked again (%d -> %d)", before, fakes[0].Requests())
			}
		})
	}
}

func TestPoolBackoff(t *testing.T) {
	fakes := searxngtest.NewN(t, 2)
	fakes[0].SetMode(searxngtest.ServerError)
	p, clk := newPool(t, searxngtest.URLs(fakes))

	wantSkip := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	for i, want := range wantSkip {
		if _, err := p.Search(t.Context(), Request{Query: "backoff"}); err != nil {
			t.Fatal(err)
		}
		st := p.Instances()[0]
		if got := st.SkippedUntil.Sub(clk.t); got != want || st.ConsecutiveFailures != i+1 {
			t.Fatalf("failure %d: skipped for %v (%d in a row), want %v", i+1, got, st.ConsecutiveFailures, want)
		}
		// Still skipped just before the end of the backoff...
		clk.t = clk.t.Add(want - time.Second)
		asked := fakes[0].Requests()
		if _, err := p.Search(t.Context(), Request{Query: "backoff"}); err != nil {
			t.Fatal(err)
		}
		if fakes[0].Requests() != asked {
			t.Fatalf("failure %d: instance asked during its backoff", i+1)
		}
		// ...and tried first once it ends.
		clk.t = clk.t.Add(time.Second)
	}

	fakes[0].SetMode(searxngtest.OK)
	if _, err := p.Search(t.Context(), Request{Query: "backoff"}); err != nil {
		t.Fatal(err)
	}
	st := p.Instances()[0]
	if !st.Healthy || st.ConsecutiveFailures != 0 || st.Successes != 1 || st.Failures != uint64(len(wantSkip)) {
		t.Errorf("after a success: %+v, want healthy with the backoff reset", st)
	}
}

// TestPoolSkippedStillTried: when every healthy instance fails, skipped
// ones are tried rather than giving up.
func TestPoolSkippedStillTried(t *testing.T) {
	fakes := searxngtest.NewN(t, 2)
	fakes[0].SetMode(searxngtest.ServerError)
	p, _ := newPool(t, searxngtest.URLs(fakes))
	if _, err := p.Search(t.Context(), Request{Query: "one"}); err != nil {
		t.Fatal(err)
	}
	fakes[0].SetMode(searxngtest.OK)
	fakes[1].SetMode(searxngtest.RateLimited)
	resp, err := p.Search(t.Context(), Request{Query: "two"})
	if err != nil || len(resp.Results) == 0 {
		t.Fatalf("Search: %v", err)
	}
	st := p.Instances()
	if !st[0].Healthy || st[1].Healthy {
		t.Errorf("statuses = %+v", st)
	}
}

func TestPoolAllFail(t *testing.T) {
	fakes := searxngtest.NewN(t, 2)
	fakes[0].SetMode(searxngtest.RateLimited)
	urls := []string{fakes[0].URL, fakes[1].URLDown()}
	p, _ := newPool(t, urls)
	_, err := p.Search(t.Context(), Request{Query: "secret words"})
	if err == nil {
		t.Fatal("Search succeeded")
	}
	msg := err.Error()
	for _, w := range []string{"2 of 2", "rate limited", "connection refused"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q lacks %q", msg, w)
		}
	}
	for _, u := range urls {
		if strings.Contains(msg, strings.TrimPrefix(u, "http://")) {
			t.Errorf("error %q names instance %s", msg, u)
		}
	}
	if strings.Contains(msg, "secret") {
		t.Errorf("error %q repeats the query", msg)
	}
	if !errors.Is(err, ErrRateLimited) || !errors.Is(err, ErrUnreachable) || !Retryable(err) {
		t.Errorf("err = %v: want both sentinels and retryable", err)
	}
	var ie *Error
	if !errors.As(err, &ie) || ie.Instance != urls[0] {
		t.Errorf("first *Error = %+v, want instance %s kept for logs", ie, urls[0])
	}

	// A single instance's error is returned as is.
	single, _ := newPool(t, urls[:1])
	_, err = single.Search(t.Context(), Request{Query: "q"})
	var se *StatusError
	if !errors.As(err, &se) || se.StatusCode != 429 || strings.Contains(err.Error(), "of 1") {
		t.Errorf("single instance err = %v", err)
	}
}

// TestPoolDeadlineShared: a hanging first instance gets half of the call's
// time, so the second still answers within the deadline.
func TestPoolDeadlineShared(t *testing.T) {
	fakes := searxngtest.NewN(t, 2)
	fakes[0].SetDelay(time.Hour)
	p, _ := newPool(t, searxngtest.URLs(fakes), WithTimeout(time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	resp, err := p.Search(ctx, Request{Query: "deadline"})
	if err != nil || len(resp.Results) == 0 {
		t.Fatalf("Search: %v", err)
	}
	if st := p.Instances()[0]; st.LastError != "timeout" {
		t.Errorf("first instance status = %+v", st)
	}

	// When the caller's own deadline passes, the instance is not blamed.
	fakes[1].SetDelay(time.Hour)
	p2, _ := newPool(t, searxngtest.URLs(fakes)[1:], WithTimeout(time.Hour))
	ctx2, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel2()
	_, err = p2.Search(ctx2, Request{Query: "deadline"})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if st := p2.Instances()[0]; !st.Healthy || st.Failures != 0 {
		t.Errorf("instance blamed for the caller's deadline: %+v", st)
	}
}

func TestPoolPing(t *testing.T) {
	fakes := searxngtest.NewN(t, 2)
	down := fakes[1].URLDown()
	p, _ := newPool(t, []string{down, fakes[0].URL})
	if st := p.Instances(); st[0].Reachable != nil {
		t.Errorf("status before any ping = %+v", st[0])
	}
	if err := p.Ping(t.Context()); err != nil {
		t.Fatalf("Ping with one instance up: %v", err)
	}
	st := p.Instances()
	if st[0].Reachable == nil || *st[0].Reachable || st[0].PingError != "unreachable" ||
		st[1].Reachable == nil || !*st[1].Reachable || st[1].PingError != "" {
		t.Errorf("statuses = %+v %+v", st[0], st[1])
	}
	// A failed probe does not make searches skip the instance.
	if !st[0].Healthy {
		t.Error("ping failure changed search health")
	}

	allDown, _ := newPool(t, []string{down})
	if err := allDown.Ping(t.Context()); !errors.Is(err, ErrUnreachable) {
		t.Errorf("Ping with every instance down: %v", err)
	}
}

func TestNewPool(t *testing.T) {
	tests := []struct {
		name    string
		urls    []string
		wantErr string
		want    []string
	}{
		{"one", []string{"http://a:1"}, "", []string{"http://a:1"}},
		{"blank entries", []string{" ", "http://a:1", "", "http://u:pw@b:2/sx/"}, "", []string{"http://a:1", "http://u:xxxxx@b:2/sx"}},
		{"none", []string{"", " "}, "no instance", nil},
		{"duplicate", []string{"http://a:1", "http://a:1/"}, "listed twice", nil},
		{"bad", []string{"http://a:1", "ftp://b"}, "scheme", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPool(tt.urls, PoolOptions{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := p.Instances()
			if len(st) != len(tt.want) {
				t.Fatalf("%d instances, want %d", len(st), len(tt.want))
			}
			for i, w := range tt.want {
				if st[i].URL != w || !st[i].Healthy {
					t.Errorf("instance %d = %+v, want %s", i, st[i], w)
				}
			}
		})
	}
}

func TestErrorClass(t *testing.T) {
	tests := map[string]error{
		"":                nil,
		"canceled":        context.Canceled,
		"timeout":         ErrTimeout,
		"unreachable":     &Error{Err: ErrUnreachable},
		"rate_limited":    newStatusError(429, nil),
		"format_disabled": newStatusError(403, nil),
		"bad_request":     newStatusError(400, nil),
		"server_error":    newStatusError(502, nil),
		"status":          newStatusError(404, nil),
		"bad_response":    ErrBadResponse,
		"other":           errors.New("x"),
	}
	for want, err := range tests {
		if got := ErrorClass(err); got != want {
			t.Errorf("ErrorClass(%v) = %q, want %q", err, got, want)
		}
	}
}
