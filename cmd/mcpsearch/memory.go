package main

import (
	"runtime/debug"
	"strings"
)

// The soft memory limit serve gives the Go runtime unless GOMEMLIMIT sets
// one: the larger of minMemoryLimit and workerMemory per upload worker. A
// worker ingesting a file near the text limit (30 MiB of text, some 40,000
// chunks, their vectors and postings) holds about 250 MiB; without a limit
// the collector lets the heap grow to twice what is live, so that one such
// file took the process to 520-590 MiB. With it the heap is collected
// before it passes the limit, as long as what is live stays under it.
const (
	minMemoryLimit = 400 << 20
	workerMemory   = 200 << 20
)

// setMemoryLimit sets the soft memory limit of the process for workers
// upload workers, unless environ (the process environment) sets GOMEMLIMIT,
// which the runtime has applied already ("off" for none). It returns the
// limit in force, and whether it was set here.
func setMemoryLimit(environ []string, workers int) (int64, bool) {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "GOMEMLIMIT=") {
			return debug.SetMemoryLimit(-1), false
		}
	}
	limit := max(minMemoryLimit, int64(workers)*workerMemory)
	debug.SetMemoryLimit(limit)
	return limit, true
}
