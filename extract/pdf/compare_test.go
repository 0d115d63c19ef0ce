package pdf

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"
)

// pdfDir names a folder of real PDFs to compare against poppler's pdftotext:
//
//	go test ./extract/pdf -run TestCompareWithPdftotext -pdfdir=DIR -v
//
// It logs per document the mean over pages of the token F1 score (words
// compared as bags, case-folded) and the extraction speed, and fails when a
// document scores below -minf1. pdftotext keeps running headers and
// footers, so the comparison reads the pages with them (KeepRunningLines);
// the share of tokens that dropping them removes is logged apart. It is
// skipped unless the flag is given and pdftotext is installed.
var pdfDir = flag.String("pdfdir", "", "folder of PDFs to compare with pdftotext")

// minF1 is the lowest acceptable mean page F1 of a document.
var minF1 = flag.Float64("minf1", 0.95, "lowest acceptable mean page F1 against pdftotext")

// pdfDiff also logs the tokens most often missing or extra per document.
var pdfDiff = flag.Bool("pdfdiff", false, "log the most frequent token differences")

func TestCompareWithPdftotext(t *testing.T) {
	if *pdfDir == "" {
		t.Skip("no -pdfdir given")
	}
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Skip("pdftotext not installed")
	}
	files, err := filepath.Glob(filepath.Join(*pdfDir, "*.pdf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no PDFs in %s: %v", *pdfDir, err)
	}
	sort.Strings(files)
	var sumF1 float64
	var allPages, allTP, allRef, allGot, allRunning int
	var elapsed time.Duration
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := exec.Command("pdftotext", "-enc", "UTF-8", file, "-").Output()
		if err != nil {
			t.Fatalf("pdftotext %s: %v", file, err)
		}
		refPages := strings.Split(string(ref), "\f")
		start := time.Now()
		doc, err := Extract(context.Background(), data, Options{KeepRunningLines: true})
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(file), err)
			continue
		}
		elapsed += took
		dropped, err := Extract(context.Background(), data, Options{})
		if err != nil {
			t.Errorf("%s without running lines: %v", filepath.Base(file), err)
			continue
		}
		running := len(tokens(doc.Text)) - len(tokens(dropped.Text))
		allRunning += running
		runes := []rune(doc.Text)
		missing, extra := map[string]int{}, map[string]int{}
		var docF1 float64
		for i, p := range doc.Pages {
			got := tokens(string(runes[p.Start:p.End]))
			var want []string
			if i < len(refPages) {
				want = tokens(refPages[i])
			}
			tp := overlap(got, want)
			diffTokens(got, want, extra)
			diffTokens(want, got, missing)
			docF1 += f1(tp, len(got), len(want))
			allTP += tp
			allRef += len(want)
			allGot += len(got)
		}
		if *pdfDiff {
			t.Logf("  %s missing: %s", filepath.Base(file), top(missing, 25))
			t.Logf("  %s extra:   %s", filepath.Base(file), top(extra, 25))
		}
		if mean := docF1 / float64(len(doc.Pages)); mean < *minF1 {
			t.Errorf("%s: mean page F1 %.3f is below %.3f", filepath.Base(file), mean, *minF1)
		}
		allPages += len(doc.Pages)
		sumF1 += docF1
		t.Logf("%-32s pages %4d  mean page F1 %.4f  %7.1f pages/s  running lines %4d tokens (%.1f%%)", filepath.Base(file), len(doc.Pages),
			docF1/float64(len(doc.Pages)), float64(len(doc.Pages))/took.Seconds(), running, percent(running, len(tokens(doc.Text))))
	}
	t.Logf("ALL: pages %d  mean page F1 %.4f  token F1 %.4f  %.1f pages/s  running lines %d tokens (%.1f%%)", allPages, sumF1/float64(allPages),
		f1(allTP, allGot, allRef), float64(allPages)/elapsed.Seconds(), allRunning, percent(allRunning, allGot))
}

func percent(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

func overlap(a, b []string) int {
	count := make(map[string]int, len(b))
	for _, w := range b {
		count[w]++
	}
	n := 0
	for _, w := range a {
		if count[w] > 0 {
			count[w]--
			n++
		}
	}
	return n
}

func f1(tp, got, want int) float64 {
	if got == 0 && want == 0 {
		return 1
	}
	if tp == 0 {
		return 0
	}
	p, r := float64(tp)/float64(got), float64(tp)/float64(want)
	return 2 * p * r / (p + r)
}

// diffTokens counts the tokens of a that b lacks into into.
func diffTokens(a, b []string, into map[string]int) {
	count := make(map[string]int, len(b))
	for _, w := range b {
		count[w]++
	}
	for _, w := range a {
		if count[w] > 0 {
			count[w]--
			continue
		}
		into[w]++
	}
}

func top(m map[string]int, n int) string {
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v > all[j].v || all[i].v == all[j].v && all[i].k < all[j].k })
	var b strings.Builder
	for i, e := range all {
		if i == n {
			break
		}
		fmt.Fprintf(&b, "%s:%d ", e.k, e.v)
	}
	return b.String()
}
