package docs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/embed"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// BenchmarkSpooledUploads sends 30 uploads of 45 MB at once through
// Reserve and SubmitFile, from spool files as the upload API writes them,
// and reports the peak Go heap while they are stored and while the workers
// (2) process them, and the process's peak RSS. The files are text of
// 45 MB, over the 32 MiB extracted text limit, so each worker reads a whole
// upload back and extracts it before it fails: the memory of processing
// without the embedding time of 1.35 GB of text. Figures only:
//
//	go test -run '^$' -bench BenchmarkSpooledUploads -benchtime 1x ./docs/
func BenchmarkSpooledUploads(b *testing.B) {
	const uploads, size = 30, 45 << 20
	url := pgtest.NewDatabase(b)
	local, err := embed.NewLocal(384)
	if err != nil {
		b.Fatal(err)
	}
	s := openStore(b, url, local, IngestOptions{Workers: 2, QueueSize: uploads})
	dir := b.TempDir()
	paths := make([]string, uploads)
	block := []byte(prose(1, 20000) + "\n")
	for i := range paths {
		var buf bytes.Buffer
		buf.Grow(size)
		fmt.Fprintf(&buf, "upload %d\n", i)
		for buf.Len() < size {
			buf.Write(block[:min(len(block), size-buf.Len())])
		}
		paths[i] = fmt.Sprintf("%s/%d.txt", dir, i)
		if err := os.WriteFile(paths[i], buf.Bytes(), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for n := range b.N {
		conv := "uploads-" + strconv.Itoa(n)
		runtime.GC()
		var peak atomic.Uint64
		stop := sampleHeap(&peak)
		start := time.Now()
		var wg sync.WaitGroup
		var errs collect
		for i := range uploads {
			wg.Go(func() {
				t, err := s.Reserve()
				if err != nil {
					errs.add(err)
					return
				}
				defer t.Release()
				_, err = s.SubmitFile(ctx, t, Upload{ConversationID: conv, FileName: fmt.Sprintf("%d.txt", i), Path: paths[i]})
				errs.add(err)
			})
		}
		wg.Wait()
		stored := time.Since(start)
		uploadPeak := peak.Swap(0)
		if err := errs.err(); err != nil {
			b.Fatal(err)
		}
		files := waitFiles(b, s, conv, uploads)
		processed := time.Since(start)
		stop()
		for _, f := range files {
			if f.Status != StatusFailed || !strings.Contains(f.Error, "limit") {
				b.Fatalf("file %s = %s %q; want failed on the text limit", f.FileName, f.Status, f.Error)
			}
		}
		b.ReportMetric(float64(uploadPeak)/(1<<20), "MiB-heap-peak-storing")
		b.ReportMetric(float64(peak.Load())/(1<<20), "MiB-heap-peak-processing")
		b.ReportMetric(float64(uploads*size)/(1<<20)/stored.Seconds(), "MiB/s-stored")
		b.ReportMetric(processed.Seconds(), "s-total")
	}
	b.StopTimer()
	if hwm := peakRSS(); hwm > 0 {
		b.ReportMetric(float64(hwm)/(1<<20), "MiB-peak-RSS")
	}
}

// sampleHeap records the largest heap in use into peak every 5 ms until
// the returned function is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			runtime.ReadMemStats(&ms)
			for {
				old := peak.Load()
				if ms.HeapInuse <= old || peak.CompareAndSwap(old, ms.HeapInuse) {
					break
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes, or 0
// where /proc does not tell.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
