package crawl

import "time"

// latencyFloor is the latency below which a host is never deemed slow: on
// a fast host (a local one, a CDN) a few milliseconds more or less is noise,
// not load.
const latencyFloor = 100 * time.Millisecond

// throttle decides how many requests one host may have in flight, from how
// fast it answers: the way Scrapy's AutoThrottle aims at a target
// concurrency from the measured latency, and TCP Vegas reads a growing
// round-trip time as a queue building up at the other end.
//
// A host answering within twice its best smoothed latency (and never below
// latencyFloor) gets Options.PerHost requests at once; beyond that, as many
// as PerHost scaled down by how much slower it has become, at least one. A
// host that answers twice as slowly as it did gets half the requests, a host
// eight times slower a quarter of them, until it speeds up again.
//
// It starts cautious, one request at a time, and opens one more slot with
// each good answer; a 429 or 5xx answer halves the slots. Only good answers
// (2xx, 304) may lower the smoothed latency or open a slot: errors often
// come back faster than pages, and a crawler that sped up when a server
// starts failing would do the opposite of what it should.
type throttle struct {
	most   int           // Options.PerHost
	window int           // slots open: 1 at first, +1 per good answer, halved on 429 and 5xx
	avg    time.Duration // smoothed latency of the host's answers
	best   time.Duration // lowest smoothed latency of good answers
}

func newThrottle(most int) throttle { return throttle{most: most, window: 1} }

// limit is how many requests may be in flight now.
func (t *throttle) limit() int {
	n := t.window
	if t.avg > 0 {
		ref := max(2*t.best, latencyFloor)
		if t.avg > ref {
			n = min(n, max(1, int(int64(t.most)*int64(ref)/int64(t.avg))))
		}
	}
	return n
}

// good takes the latency of a good answer (2xx or 304) into account.
func (t *throttle) good(d time.Duration) {
	if t.avg == 0 {
		t.avg = d
	} else {
		// AutoThrottle's average: half the old, half the new.
		t.avg = (t.avg + d) / 2
	}
	if t.best == 0 || t.avg < t.best {
		t.best = t.avg
	}
	t.window = min(t.window+1, t.most)
}

// bad takes the latency of an error answer (4xx, 5xx, no answer) into
// account: it may only slow the host down.
func (t *throttle) bad(d time.Duration) {
	switch {
	case t.avg == 0:
		t.avg = d
	case d > t.avg:
		t.avg = (t.avg + d) / 2
	}
}

// refused halves the slots after a 429 or 5xx answer.
func (t *throttle) refused() { t.window = max(1, t.window/2) }
