package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestIngestSyncFolder syncs a folder three times: everything is added,
// then only what changed is read again and what was deleted is removed,
// then nothing is read at all.
func TestIngestSyncFolder(t *testing.T) {
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "MCP_docs_ocr_mode": "off"}
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.md", "# Anchors\n\nShips drop anchor when the tide is low.")
	write("b.md", "# Buoys\n\nRed buoys mark the port side.")
	write("sub/c.txt", "Charts are corrected every Friday.")
	write("d.txt", "Depths are in metres.")
	sync := func() string {
		t.Helper()
		out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "notes", "--sync", dir)
		if err != nil {
			t.Fatalf("sync: %v\nstdout %s\nstderr %s", err, out, errOut)
		}
		return out
	}
	if out := sync(); !strings.Contains(out, "\n4 added, 0 updated, 0 removed, 0 unchanged;") {
		t.Fatalf("first sync: %s", out)
	}
	// Two files changed, one deleted, one added, one touched without a
	// change.
	later := time.Now().Add(time.Minute)
	write("a.md", "# Anchors\n\nShips drop anchor in the outer harbour.")
	write("sub/c.txt", "Charts are corrected every Monday.")
	if err := os.Remove(filepath.Join(dir, "d.txt")); err != nil {
		t.Fatal(err)
	}
	write("e.md", "# Echo sounders\n\nThey measure depth.")
	if err := os.Chtimes(filepath.Join(dir, "b.md"), later, later); err != nil {
		t.Fatal(err)
	}
	if out := sync(); !strings.Contains(out, "\n1 added, 2 updated, 1 removed, 1 unchanged;") {
		t.Fatalf("second sync: %s", out)
	}
	out := sync()
	if !strings.Contains(out, "0 added, 0 updated, 0 removed, 4 unchanged; 0 fetched") {
		t.Fatalf("third sync: %s", out)
	}
	// What the conversation holds is the folder as it is now.
	listed, _, err := runCLI(t, vars, "sync", "--conversation", "notes")
	if err != nil || !strings.Contains(listed, "4 unchanged") {
		t.Fatalf("sync command: %v %s", err, listed)
	}
}

// TestIngestCrawl crawls a small loopback site from the CLI, then syncs it.
func TestIngestCrawl(t *testing.T) {
	pages := map[string]string{
		"/":  `<html><body><h1>Home</h1><p>Welcome to the harbour handbook.</p><a href="/a">A</a></body></html>`,
		"/a": `<html><body><h1>Anchors</h1><p>Ships drop anchor when the tide is low.</p></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), strings.NewReader(body))
	}))
	defer srv.Close()
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "MCP_docs_ocr_mode": "off", "MCP_fetch_url_allow_hosts": "127.0.0.1"}
	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "site", "--crawl", srv.URL+"/", "--max-pages", "10")
	if err != nil || !strings.HasPrefix(out, "2 added, 0 updated, 0 removed, 0 unchanged; 2 fetched") {
		t.Fatalf("crawl: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	out, errOut, err = runCLI(t, vars, "sync", "--conversation", "site")
	if err != nil || !strings.HasPrefix(out, "0 added, 0 updated, 0 removed, 2 unchanged; 2 fetched (2 not modified)") {
		t.Fatalf("sync: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if _, _, err := runCLI(t, vars, "ingest", "--conversation", "site", "--crawl", srv.URL+"/", "--scope", "galaxy"); err == nil {
		t.Fatal("a bad scope was accepted")
	}
}

// TestIngestCrawlPrivateSite crawls a site that answers only requests with
// its token, passed with --header; a later sync sends it again, and no
// output shows it. The new options' bad values are refused, named.
func TestIngestCrawlPrivateSite(t *testing.T) {
	const token = "Bearer s3cret-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		body, ok := map[string]string{
			"/":  `<html><body><h1>Ops</h1><p>The pager rotates every Monday.</p><a href="/b">B</a></body></html>`,
			"/b": `<html><body><h1>Backups</h1><p>Backups run at two in the morning.</p></body></html>`,
		}[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), strings.NewReader(body))
	}))
	defer srv.Close()
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "MCP_docs_ocr_mode": "off", "MCP_fetch_url_allow_hosts": "127.0.0.1"}
	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "ops", "--crawl", srv.URL+"/",
		"--header", "Authorization: "+token, "--delay-ms", "5", "--render", "never")
	if err != nil || !strings.HasPrefix(out, "2 added, 0 updated, 0 removed, 0 unchanged; 2 fetched") {
		t.Fatalf("crawl: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	all := out + errOut
	out, errOut, err = runCLI(t, vars, "sync", "--conversation", "ops")
	if err != nil || !strings.HasPrefix(out, "0 added, 0 updated, 0 removed, 2 unchanged; 2 fetched (2 not modified)") {
		t.Fatalf("sync: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if all += out + errOut; strings.Contains(all, "s3cret") {
		t.Errorf("the output shows the header's value: %s", all)
	}
	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"--render", "sometimes"}, `render "sometimes" must be never, auto or always`},
		{[]string{"--delay-ms", "70000"}, "delay_ms 70000 must be between 0 and 60000"},
		{[]string{"--header", "Authorization"}, "want 'Name: value'"},
		{[]string{"--header", "X-Big: " + strings.Repeat("x", 9000)}, "headers: 9005 bytes, more than 8192"},
	} {
		_, errOut, err := runCLI(t, vars, append([]string{"ingest", "--conversation", "ops", "--crawl", srv.URL + "/"}, bad.args...)...)
		if err == nil || !strings.Contains(err.Error()+errOut, bad.says) || strings.Contains(err.Error()+errOut, "xxxxxxxx") {
			t.Errorf("%.40q: %v %s, want %q", bad.args, err, errOut, bad.says)
		}
	}
}
