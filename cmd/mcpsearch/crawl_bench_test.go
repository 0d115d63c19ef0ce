package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// pgManualDir is where Debian's postgresql-doc-15 package installs
// PostgreSQL 15's HTML manual; MCPSEARCH_PG_MANUAL names another copy.
const pgManualDir = "/usr/share/doc/postgresql-doc-15/html"

// BenchmarkCrawlManual crawls PostgreSQL 15's HTML manual (1,167 pages)
// from loopback with the built binary and the default settings, as
//
//	mcpsearch ingest --conversation manual --crawl http://127.0.0.1:PORT/index.html --max-pages 2000
//
// which returns once every page is stored, chunked and embedded, and
// reports pages per second, the CPU time per page of mcpsearch and of the
// PostgreSQL server that stored them, and the process's peak memory. It
// skips when the manual is not installed (Debian: apt-get install
// postgresql-doc-15). Run it alone:
//
//	go test -run XXX -bench CrawlManual -benchtime 1x ./cmd/mcpsearch
//
// PostgreSQL's CPU is read from /proc: the server the test database is on
// must run on this machine, and work others give it meanwhile is counted.
func BenchmarkCrawlManual(b *testing.B) {
	dir := os.Getenv("MCPSEARCH_PG_MANUAL")
	if dir == "" {
		dir = pgManualDir
	}
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err != nil {
		b.Skipf("PostgreSQL's HTML manual is not installed (Debian: apt-get install postgresql-doc-15; or set MCPSEARCH_PG_MANUAL): %v", err)
	}
	site := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer site.Close()
	bin := filepath.Join(b.TempDir(), "mcpsearch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	var pages int
	var took, cpu, pgCPU time.Duration
	var peak int64
	for i := 0; b.Loop(); i++ {
		dbURL := pgtest.NewDatabase(b)
		postmaster, err := postmasterOf(dbURL)
		if err != nil {
			b.Skipf("PostgreSQL's CPU cannot be read here: %v", err)
		}
		cmd := exec.Command(bin, "ingest", "--conversation", fmt.Sprintf("manual-%d", i), "--crawl", site.URL+"/index.html", "--max-pages", "2000")
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "MCP_fetch_url_allow_hosts=127.0.0.1", "MCP_docs_ocr_mode=off")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		pgBefore, err := treeCPU(postmaster)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		err = cmd.Run()
		took += time.Since(start)
		pgAfter, _ := treeCPU(postmaster)
		if err != nil {
			b.Fatalf("ingest: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		var added, fetched int
		if _, err := fmt.Sscanf(stdout.String(), "%d added, 0 updated, 0 removed, 0 unchanged; %d fetched", &added, &fetched); err != nil || added < 1100 {
			b.Fatalf("ingest said %q (%v)", stdout.String(), err)
		}
		pages += added
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		pgCPU += pgAfter - pgBefore
		peak = max(peak, ru.Maxrss<<10)
		b.Logf("%s", strings.TrimSpace(stdout.String()))
	}
	perPage := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(max(pages, 1)) }
	b.ReportMetric(float64(pages)/took.Seconds(), "pages/s")
	b.ReportMetric(perPage(cpu), "CPU-ms/page")
	b.ReportMetric(perPage(pgCPU), "PG-CPU-ms/page")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	b.Logf("%d pages in %v: %.1f pages/s, %.1f CPU-ms a page (mcpsearch %.1f + PostgreSQL %.1f), peak memory %d MB",
		pages, took.Round(time.Millisecond), float64(pages)/took.Seconds(), perPage(cpu+pgCPU), perPage(cpu), perPage(pgCPU), peak>>20)
}

// postmasterOf returns the process id of the PostgreSQL server holding
// the database at url, when it runs on this machine.
func postmasterOf(url string) (int, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return 0, err
	}
	f, err := procStat(backend)
	if err != nil {
		return 0, fmt.Errorf("the database's server does not run on this machine: %w", err)
	}
	return strconv.Atoi(f[1])
}

// procStat returns the fields of /proc/PID/stat after the command's name:
// state, ppid, ...
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return strings.Fields(s[i+1:]), nil
}

// treeCPU returns the CPU time of a process and its children, running or
// ended: a PostgreSQL server's backends come and go with their
// connections, and an ended one's time is in its parent's cutime and
// cstime.
func treeCPU(root int) (time.Duration, error) {
	const hz = 100 // USER_HZ, the unit of /proc's times on Linux
	ticks := func(f []string, from, to int) int64 {
		var n int64
		for i := from; i <= to; i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	f, err := procStat(root)
	if err != nil {
		return 0, err
	}
	// Fields after the name: utime 11, stime 12, cutime 13, cstime 14.
	total := ticks(f, 11, 14)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root {
			continue
		}
		f, err := procStat(pid)
		if err != nil || f[1] != strconv.Itoa(root) {
			continue
		}
		total += ticks(f, 11, 12)
	}
	return time.Duration(total) * time.Second / hz, nil
}
