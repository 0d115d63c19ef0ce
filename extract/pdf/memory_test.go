package pdf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pdftest"
)

// sharedStreamPDF returns a PDF of pages pages whose page objects all name
// one deflated content stream that decodes to at least textBytes bytes,
// nearly all of it text shown with Tj: a file of a few hundred kilobytes
// that asks a naive reader for pages times textBytes of memory.
func sharedStreamPDF(t testing.TB, pages, textBytes int) []byte {
	t.Helper()
	w := pdftest.New()
	shared := w.Stream("", repeatedText(textBytes), true)
	for i := 0; i < pages; i++ {
		w.Page("")
		// Page added a stream and then the page object; point the page at
		// the shared stream instead.
		w.Set(w.Next()-1, fmt.Sprintf("<< /Type /Page /Parent PAGES /MediaBox [0 0 612 792] /Contents %d 0 R >>", shared))
	}
	return w.Bytes()
}

// repeatedText is a content stream of at least n bytes showing one line of
// text over and over.
func repeatedText(n int) string {
	const line = "(the same words shown again and again on every page) Tj T*\n"
	return "BT /F1 10 Tf 72 720 Td 12 TL\n" + strings.Repeat(line, n/len(line)+1) + "ET\n"
}

// sharedFormPDF is sharedStreamPDF's variant where every page paints one
// form XObject holding the text.
func sharedFormPDF(t testing.TB, pages, textBytes int) []byte {
	t.Helper()
	w := pdftest.New()
	form := w.Stream("/Type /XObject /Subtype /Form /BBox [0 0 612 792]", repeatedText(textBytes), true)
	w.XObjects = fmt.Sprintf("<< /Fm1 %d 0 R >>", form)
	for i := 0; i < pages; i++ {
		w.Page("/Fm1 Do")
	}
	return w.Bytes()
}

// TestPDFLimits checks each memory limit: a stream that many pages share
// is decoded once, and each limit, when passed, fails the file with an
// error that names it.
func TestPDFLimits(t *testing.T) {
	shared := sharedStreamPDF(t, 50, 100<<10)
	tests := []struct {
		name    string
		data    []byte
		opts    Options
		message string
	}{
		// Decoded once per page, the stream would pass the decoded limit.
		{"shared stream decoded once", shared, Options{MaxDecodedBytes: 150 << 10}, ""},
		{"shared form decoded once", sharedFormPDF(t, 50, 100<<10), Options{MaxDecodedBytes: 150 << 10}, ""},
		{"text limit", shared, Options{MaxTextBytes: 1 << 20}, "exceeds 1048576 bytes (the text limit)"},
		{"text limit inside one page", shared, Options{MaxTextBytes: 10 << 10}, "exceeds 10240 bytes (the text limit)"},
		{"stream limit", shared, Options{MaxStreamBytes: 50 << 10}, "more than 51200 bytes (the stream limit)"},
		{"decoded limit", multiPagePDF(t, true), Options{MaxDecodedBytes: 100}, "more than 100 bytes (the decoded limit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := Extract(context.Background(), tt.data, tt.opts)
			if tt.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkDocument(t, doc)
				if len(doc.Pages) != 50 || len(doc.Text) < 50*80<<10 {
					t.Errorf("%d pages, %d bytes of text", len(doc.Pages), len(doc.Text))
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("Extract = %v, want ErrTooLarge saying %q", err, tt.message)
			}
		})
	}
}

// BenchmarkSharedStreamAttack reports the memory allocated extracting the
// shared stream attack file with the default limits.
func BenchmarkSharedStreamAttack(b *testing.B) {
	data := sharedStreamPDF(b, 200, 30<<20)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Extract(context.Background(), data, Options{}); !errors.Is(err, ErrTooLarge) {
			b.Fatal(err)
		}
	}
}

// memoryEnv names the variable that runs TestPDFAttackMemory.
const memoryEnv = "MCPSEARCH_PDF_MEMORY"

// TestPDFAttackMemory reports the peak memory of extracting the shared
// stream attack file (200 pages sharing one stream of 64 MiB of text),
// alone and two at once, each in a fresh process so that peaks do not mix:
//
//	MCPSEARCH_PDF_MEMORY=1 go test ./extract/pdf -run TestPDFAttackMemory -v
//
// It measures; it asserts nothing about the figures.
func TestPDFAttackMemory(t *testing.T) {
	if os.Getenv(memoryEnv) == "" {
		t.Skip("set " + memoryEnv + "=1 to measure")
	}
	if file := os.Getenv(memoryEnv + "_FILE"); file != "" {
		attackChild(t, file)
		return
	}
	dir := t.TempDir()
	for _, a := range []struct {
		name string
		data []byte
	}{
		{"shared content stream", sharedStreamPDF(t, 200, 64<<20)},
		{"shared form", sharedFormPDF(t, 200, 64<<20)},
		// Within the stream limit, the text limit ends it.
		{"shared 30 MiB content stream", sharedStreamPDF(t, 200, 30<<20)},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(a.name, " ", "-")+".pdf")
		if err := os.WriteFile(file, a.data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 2} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPDFAttackMemory$", "-test.v")
			cmd.Env = append(os.Environ(), memoryEnv+"_FILE="+file, memoryEnv+"_N="+strconv.Itoa(n))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", a.name, err, out)
			}
			for _, line := range strings.Split(string(out), "\n") {
				if i := strings.Index(line, "RESULT "); i >= 0 {
					t.Logf("%s, %d KiB file, %d at once: %s", a.name, len(a.data)>>10, n, line[i+len("RESULT "):])
				}
			}
		}
	}
}

// attackChild extracts file N times at once and logs the peak Go heap and
// the peak resident set size of the process.
func attackChild(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(os.Getenv(memoryEnv + "_N"))
	stop := make(chan struct{})
	peakHeap := make(chan uint64)
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-stop:
				peakHeap <- peak
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Extract(context.Background(), data, Options{})
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	t.Logf("RESULT peak heap %d MiB, peak RSS %s, %s, error: %v", <-peakHeap>>20, peakRSS(), took.Round(time.Millisecond), errs[0])
}

// peakRSS reads the process's resident set high-water mark where the
// system reports it.
func peakRSS() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return fmt.Sprintf("%d MiB", kb>>10)
		}
	}
	return "unknown"
}
