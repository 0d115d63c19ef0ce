package ratelimit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTake measures one call's round trip to the database, with the
// latency's percentiles: a caller's bucket alone, or with the tool's shared
// ceiling as Allow takes them. Calls are spread over 100 callers; with a
// shared ceiling every call also locks the tool's one row, the contention
// a global ceiling costs.
func BenchmarkTake(b *testing.B) {
	u := newDatabase(b)
	big := Limit{PerMinute: 1 << 30, Burst: 1 << 30}
	for _, bc := range []struct {
		name     string
		parallel bool
		shared   Limit
	}{
		{"own bucket/serial", false, Limit{}},
		{"own bucket/parallel", true, Limit{}},
		{"own and shared/serial", false, big},
		{"own and shared/parallel", true, big},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(openPool(b, u), Options{Timeout: 5 * time.Second})
			var n atomic.Int64
			var mu sync.Mutex
			var all []time.Duration
			run := func(next func() bool) {
				var own []time.Duration
				for next() {
					i := n.Add(1)
					start := time.Now()
					d, err := l.Allow(context.Background(), fmt.Sprintf("key-%d", i%100), "search_docs", big, bc.shared)
					if err != nil || !d.Allowed {
						b.Errorf("%+v, %v", d, err)
						return
					}
					own = append(own, time.Since(start))
				}
				mu.Lock()
				all = append(all, own...)
				mu.Unlock()
			}
			if bc.parallel {
				b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
			} else {
				run(b.Loop)
			}
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
