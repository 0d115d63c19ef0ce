package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSetMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	for _, c := range []struct {
		environ []string
		workers int
		want    int64
		set     bool
	}{
		{nil, 2, 400 << 20, true},
		{[]string{"HOME=/x"}, 4, 800 << 20, true},
		{nil, 0, 400 << 20, true},
		{[]string{"GOMEMLIMIT=off"}, 2, math.MaxInt64, false},
	} {
		debug.SetMemoryLimit(math.MaxInt64)
		got, set := setMemoryLimit(c.environ, c.workers)
		if got != c.want || set != c.set || debug.SetMemoryLimit(-1) != c.want {
			t.Errorf("setMemoryLimit(%q, %d) = %d, %v (in force %d), want %d, %v", c.environ, c.workers, got, set, debug.SetMemoryLimit(-1), c.want, c.set)
		}
	}
}
