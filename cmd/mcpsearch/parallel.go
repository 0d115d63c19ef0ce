package main

import (
	"context"
	"sync"
	"sync/atomic"
)

// forEach calls do for every index below n on up to workers goroutines,
// each taking the next index as it finishes one, so slow items (a large PDF)
// do not hold up the rest. It stops handing out indexes when ctx ends or a
// call fails, and returns the first failure.
func forEach(ctx context.Context, n, workers int, do func(i int) error) error {
	var (
		next     atomic.Int64
		failed   atomic.Bool
		once     sync.Once
		firstErr error
		wg       sync.WaitGroup
	)
	for range max(1, min(workers, n)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := do(i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}
