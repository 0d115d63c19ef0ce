package extract

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"
)

// memoryEnv names the variable that runs TestExtractMemory.
const memoryEnv = "MCPSEARCH_EXTRACT_MEMORY"

// TestExtractMemory reports the peak memory of extracting a 50 MB
// workbook and zip bombs, each in a fresh process so that peaks do not
// mix:
//
//	MCPSEARCH_EXTRACT_MEMORY=1 go test ./extract -run TestExtractMemory -v -timeout 30m
//
// It measures; it asserts nothing about the figures.
func TestExtractMemory(t *testing.T) {
	if os.Getenv(memoryEnv) == "" {
		t.Skip("set " + memoryEnv + "=1 to measure")
	}
	if file := os.Getenv(memoryEnv + "_FILE"); file != "" {
		memoryChild(t, file)
		return
	}
	dir := t.TempDir()
	// Six million cells of numbers and words: a workbook of 50 MB.
	start := time.Now()
	book := workbook(t, 600000, 10)
	t.Logf("workbook: %d MB, written in %s", len(book)>>20, time.Since(start).Round(time.Second))
	bomb, crc := deflatedZeros(1024)
	small, _ := deflatedZeros(64)
	cases := []struct {
		name, mime string
		data       []byte
		textLimit  int64
	}{
		{"50 MB XLSX, default text limit", MIMEXLSX, book, 0},
		{"50 MB XLSX, text limit 512 MiB", MIMEXLSX, book, 512 << 20},
		{"zip bomb (1 GiB of zeros in word/document.xml)", MIMEDOCX, makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
			entry{name: "_rels/.rels", data: []byte(packageRels)},
			entry{name: "word/document.xml", data: bomb, raw: true, crc: crc, size: 1 << 30}), 0},
		{"zip bomb under the size limits (64 MiB)", MIMEDOCX, makeZip(t,
			entry{name: "[Content_Types].xml", data: []byte(contentTypesDOCX)},
			entry{name: "_rels/.rels", data: []byte(packageRels)},
			entry{name: "word/document.xml", data: small, raw: true, crc: zerosCRC(64 << 20), size: 64 << 20}), 0},
	}
	for i, c := range cases {
		file := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(file, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestExtractMemory$", "-test.v")
		cmd.Env = append(os.Environ(), memoryEnv+"_FILE="+file, memoryEnv+"_MIME="+c.mime,
			memoryEnv+"_TEXT="+strconv.FormatInt(c.textLimit, 10))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if i := strings.Index(line, "RESULT "); i >= 0 {
				t.Logf("%s, %d KiB file: %s", c.name, len(c.data)>>10, line[i+len("RESULT "):])
			}
		}
	}
}

// memoryChild extracts file once and logs the peak Go heap and the peak
// resident set size of the process.
func memoryChild(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	limit, _ := strconv.ParseInt(os.Getenv(memoryEnv+"_TEXT"), 10, 64)
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
	doc, err := (Limits{MaxTextBytes: limit}).Extract(context.Background(), os.Getenv(memoryEnv+"_MIME"), data)
	took := time.Since(start)
	close(stop)
	result := fmt.Sprintf("error: %v", err)
	if err == nil {
		result = fmt.Sprintf("%d MiB of text", len(doc.Text)>>20)
	}
	t.Logf("RESULT peak heap %d MiB, peak RSS %s, %s, %s", <-peakHeap>>20, peakRSS(), took.Round(time.Millisecond), result)
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
