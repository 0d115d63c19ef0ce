package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestForEach(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		n         int
		workers   int
		failAt    int // index whose call fails; -1 for none
		wantErr   error
		wantCalls func(calls int) bool
	}{
		{"all items, more workers than items", 3, 8, -1, nil, func(c int) bool { return c == 3 }},
		{"all items, one worker", 50, 1, -1, nil, func(c int) bool { return c == 50 }},
		{"zero workers still work", 5, 0, -1, nil, func(c int) bool { return c == 5 }},
		{"nothing to do", 0, 4, -1, nil, func(c int) bool { return c == 0 }},
		{"a failure stops the run", 1000, 1, 10, boom, func(c int) bool { return c == 11 }},
		{"a failure with several workers", 1000, 4, 10, boom, func(c int) bool { return c >= 11 && c < 1000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int64
			seen := make([]atomic.Int32, tt.n)
			err := forEach(context.Background(), tt.n, tt.workers, func(i int) error {
				calls.Add(1)
				seen[i].Add(1)
				if i == tt.failAt {
					return boom
				}
				return nil
			})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("error %v, want %v", err, tt.wantErr)
			}
			if c := int(calls.Load()); !tt.wantCalls(c) {
				t.Errorf("%d calls", c)
			}
			for i := range seen {
				if n := seen[i].Load(); n > 1 {
					t.Errorf("index %d done %d times", i, n)
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int64
	if err := forEach(ctx, 10, 2, func(int) error { calls.Add(1); return nil }); err != nil || calls.Load() != 0 {
		t.Errorf("cancelled context: %v, %d calls; want none", err, calls.Load())
	}
}
