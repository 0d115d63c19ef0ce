package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/mcpsearch/mcpsearch/docs"
	"github.com/mcpsearch/mcpsearch/extract"
)

// progress reports ingestion. Files skipped or failed are listed, one line
// each, files ready with a note (pages that still need OCR) too, and, with
// verbose, every file ingested or already present; on a
// terminal a bar below them is redrawn at most ten times a second with the
// files and chunks done, the rate and the time left. The closing summary
// counts every file. Every line is cleaned: names and error texts may hold
// bytes from the files.
type progress struct {
	w       io.Writer
	tty     bool
	verbose bool
	total   int
	start   time.Time

	mu      sync.Mutex
	drawn   time.Time
	done    int
	ready   int
	present int
	failed  int
	skipped int
	pages   int
	chunks  int
}

func newProgress(w io.Writer, tty, verbose bool, total, skipped int) *progress {
	return &progress{w: w, tty: tty, verbose: verbose, total: total, skipped: skipped, start: time.Now()}
}

func (p *progress) listSkipped(skips []skip) {
	for _, s := range skips {
		fmt.Fprintln(p.w, extract.CleanMessage(fmt.Sprintf("skipped %s: %s", s.path, s.reason)))
	}
}

// file records the outcome of one file.
func (p *progress) file(name string, f docs.File, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	var line string
	switch {
	case err != nil:
		p.failed++
		line = fmt.Sprintf("failed  %s: %v", name, err)
	case f.Status == docs.StatusFailed:
		p.failed++
		line = fmt.Sprintf("failed  %s: %s", name, f.Error)
	case f.Duplicate:
		p.present++
		if p.verbose {
			line = fmt.Sprintf("exists  %s (id %s, already uploaded)", name, f.ID)
		}
	default:
		p.ready++
		p.pages += f.PageCount
		p.chunks += f.ChunkCount
		// A note (pages of a scan that still need OCR) is always shown.
		if p.verbose || f.Note != "" {
			line = fmt.Sprintf("ready   %s: %d pages, %d chunks (id %s)", name, f.PageCount, f.ChunkCount, f.ID)
			if f.Note != "" {
				line += "; " + f.Note
			}
		}
	}
	if !p.tty {
		if line != "" {
			fmt.Fprintln(p.w, extract.CleanMessage(line))
		}
		return
	}
	if line != "" {
		fmt.Fprintf(p.w, "\r\033[K%s\n", extract.CleanMessage(line))
		p.drawn = time.Time{}
	}
	if p.done == p.total || time.Since(p.drawn) >= 100*time.Millisecond {
		p.drawn = time.Now()
		fmt.Fprint(p.w, "\r\033[K"+p.bar())
		if p.done == p.total {
			fmt.Fprintln(p.w)
		}
	}
}

// bar is the progress line: a bar, files and chunks done, the rate, and
// the time left at that rate.
func (p *progress) bar() string {
	const width = 24
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	elapsed := max(time.Since(p.start).Seconds(), 0.001)
	rate := float64(p.done) / elapsed
	eta := "--"
	if rate > 0 && p.done < p.total {
		eta = (time.Duration(float64(p.total-p.done)/rate) * time.Second).Round(time.Second).String()
	} else if p.done == p.total {
		eta = "0s"
	}
	return fmt.Sprintf("[%s%s] files %d/%d  chunks %d  %.0f files/s, %.0f chunks/s  left %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.done, p.total, p.chunks,
		rate, float64(p.chunks)/elapsed, eta)
}

// failures returns the number of files that failed.
func (p *progress) failures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}

// summary writes the closing line: what became of every file.
func (p *progress) summary(w io.Writer, conv string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := time.Since(p.start).Seconds()
	fmt.Fprintln(w, extract.CleanMessage(fmt.Sprintf("%d ingested, %d already present, %d failed, %d skipped; %d pages, %d chunks in %.1fs (%.0f files/s) into conversation %s",
		p.ready, p.present, p.failed, p.skipped, p.pages, p.chunks, elapsed, float64(p.done)/max(elapsed, 0.001), conv)))
}
