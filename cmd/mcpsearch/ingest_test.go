package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// TestIngestFolderListsSkippedFiles walks a folder holding one of each kind
// of file ingest leaves out and checks that each is listed with its reason,
// that files are judged by content as uploads are, and that the summary
// counts every file.
func TestIngestFolderListsSkippedFiles(t *testing.T) {
	// Without OCR an image cannot be read, whatever this machine has.
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "MCP_docs_max_file_mb": "1", "MCP_docs_ocr_mode": "off"}
	dir := t.TempDir()
	write := func(name string, data []byte) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("notes/a.md", []byte("# Alpha\n\nThe answer to the E1047 puzzle is forty-two."))
	// No extension: text by its content, as an upload of it would be.
	write("copyright", []byte("Copyright 2026 the authors. Permission is granted to copy this file."))
	// A name with a terminal escape is refused, as an upload of it is, and
	// printed escaped.
	write("evil\x1b[31m.txt", []byte("A file whose name colours the terminal."))
	write("image.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	write("blob.dat", []byte{0, 1, 2, 3, 0xff, 0xfe, 0, 0, 7})
	write("empty.txt", nil)
	write("big.txt", []byte(strings.Repeat("a", 1<<20+1)))
	write(".env", []byte("SECRET=1"))
	write(".git/config", []byte("[core]"))
	if err := os.Symlink(filepath.Join(dir, "missing"), filepath.Join(dir, "broken")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "notes"), filepath.Join(dir, "notes-link")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"image.png":  "unsupported type: PNG image: reading images needs OCR: OCR is off",
		"blob.dat":   "unsupported type: binary content",
		"empty.txt":  "empty file",
		"big.txt":    "too large: 1.0 MB, over the limit of 1 MB (MCP_docs_max_file_mb)",
		".env":       "hidden file",
		".git/":      "hidden folder",
		"broken":     "broken link",
		"notes-link": "link to a folder, not followed",
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err == nil {
		want["fifo"] = "not a regular file"
	}
	if os.Geteuid() != 0 {
		// Root reads any folder; only others can be refused.
		write("locked/x.txt", []byte("locked away"))
		if err := os.Chmod(filepath.Join(dir, "locked"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
		want["locked"] = "unreadable: permission denied"
	}

	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "walk", "--verbose", dir)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 files failed") {
		t.Fatalf("ingest: %v, want the file with an escape in its name to fail\nstdout %s\nstderr %s", err, out, errOut)
	}
	if line := "failed  " + filepath.Join(dir, `evil\x1b[31m.txt`) + ": "; !strings.Contains(errOut, line) || !strings.Contains(errOut, "control or bidirectional formatting character") {
		t.Errorf("stderr does not say why the escaped name failed:\n%s", errOut)
	}
	for name, reason := range want {
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			path += string(filepath.Separator)
		}
		if line := "skipped " + path + ": " + reason; !strings.Contains(errOut, line+"\n") {
			t.Errorf("stderr lacks %q:\n%s", line, errOut)
		}
	}
	for _, name := range []string{"notes/a.md", "copyright"} {
		if !strings.Contains(errOut, "ready   "+filepath.Join(dir, name)+":") {
			t.Errorf("%s not ingested:\n%s", name, errOut)
		}
	}
	summary := "2 ingested, 0 already present, 1 failed, " + strconv.Itoa(len(want)) + " skipped;"
	if !strings.HasPrefix(out, summary) {
		t.Errorf("summary %q, want it to start with %q", out, summary)
	}
	checkClean(t, out+errOut)
	// The run is a job the server can show: its files carry it, the
	// refused one is counted with its reason.
	var id, status, caller string
	var refused, stored int
	conn, err := pgx.Connect(t.Context(), vars["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	err = conn.QueryRow(t.Context(), `
		SELECT j.id::text, j.status, j.caller, j.refused, (SELECT count(*) FROM files f WHERE f.conversation_id = j.conversation_id AND f.job_id = j.id)
		FROM jobs j WHERE j.conversation_id = 'walk' AND j.kind = 'ingest' AND j.submitted`).Scan(&id, &status, &caller, &refused, &stored)
	if err != nil {
		t.Fatalf("the ingest job: %v", err)
	}
	if caller != "cli" || refused != 1 || stored != 2 || !strings.Contains(errOut, "job "+id+"\n") {
		t.Errorf("ingest job %s: status %s, caller %s, %d refused, %d files; stderr:\n%s", id, status, caller, refused, stored, errOut)
	}

	// Files named explicitly are tried whatever they look like; what the
	// ingester refuses is a failure, reported without the file's bytes.
	write("report.pdf", []byte("%PDF-1.7\n\x00\x01\x1b[2J\xff\xfe garbage that is no PDF \x00\x07"))
	out, errOut, err = runCLI(t, vars, "ingest", "--conversation", "walk", "--verbose",
		filepath.Join(dir, "image.png"), filepath.Join(dir, "report.pdf"), filepath.Join(dir, "notes", "a.md"), filepath.Join(dir, "big.txt"))
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("explicit files: err %v, want failures (exit 1)\nstderr %s", err, errOut)
	}
	if !strings.HasPrefix(out, "0 ingested, 1 already present, 3 failed, 0 skipped;") {
		t.Errorf("summary %q", out)
	}
	for _, line := range []string{
		"failed  " + filepath.Join(dir, "image.png") + ": ",
		"failed  " + filepath.Join(dir, "report.pdf") + ": ",
		"failed  " + filepath.Join(dir, "big.txt") + ": too large: 1.0 MB, over the limit of 1 MB (MCP_docs_max_file_mb)",
		"exists  " + filepath.Join(dir, "notes", "a.md"),
	} {
		if !strings.Contains(errOut, line) {
			t.Errorf("stderr lacks %q:\n%s", line, errOut)
		}
	}
	checkClean(t, out+errOut)
}

// checkClean fails when s holds invalid UTF-8 or control characters other
// than line ends.
func checkClean(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("output is not valid UTF-8: %q", s)
	}
	for _, r := range s {
		if r != '\n' && unicode.IsControl(r) {
			t.Errorf("output holds control character %U: %q", r, s)
			return
		}
	}
}

// TestIngestURLAndDeleteConversation: a URL is fetched under fetch_url's
// address rules and stored with its source; delete removes the whole
// conversation.
func TestIngestURLAndDeleteConversation(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>Runbook</title></head><body><main><h1>Runbook</h1><p>Rotate the signing keys every ninety days.</p></main></body></html>")
	}))
	t.Cleanup(site.Close)
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t)}

	// Loopback is refused unless the operator allows it.
	_, errOut, err := runCLI(t, vars, "ingest", "--conversation", "ops", site.URL+"/runbook")
	if err == nil || !strings.Contains(errOut+err.Error(), "loopback") {
		t.Errorf("a loopback URL was not refused: %v\n%s", err, errOut)
	}
	vars["MCP_fetch_url_allow_hosts"] = "127.0.0.1"
	off := map[string]string{"DATABASE_URL": vars["DATABASE_URL"], "MCP_fetch_url_allow_hosts": "127.0.0.1", "MCP_fetch_url_enabled": "false"}
	if _, errOut, err := runCLI(t, off, "ingest", "--conversation", "ops", site.URL+"/runbook"); err == nil || !strings.Contains(errOut, "ingestion by URL is off") {
		t.Errorf("with MCP_fetch_url_enabled=false a URL was not refused: %v\n%s", err, errOut)
	}
	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "ops", site.URL+"/runbook")
	if err != nil || !strings.Contains(out, "1 ingested") {
		t.Fatalf("ingest URL: %v\n%s\n%s", err, out, errOut)
	}
	pool, err := pgx.Connect(t.Context(), vars["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(t.Context())
	var source string
	if err := pool.QueryRow(t.Context(), `SELECT source_url FROM files WHERE conversation_id = 'ops'`).Scan(&source); err != nil || source != site.URL+"/runbook" {
		t.Errorf("stored source %q (%v), want the URL", source, err)
	}

	out, _, err = runCLI(t, vars, "delete", "--conversation", "ops")
	if err != nil || !strings.Contains(out, "deleted 1 files") {
		t.Errorf("delete: %v %s", err, out)
	}
	var n int
	pool.QueryRow(t.Context(), `SELECT count(*) FROM files WHERE conversation_id = 'ops'`).Scan(&n)
	if n != 0 {
		t.Errorf("%d files left after delete", n)
	}
}

// TestIngestThenIndex ingests a conversation too large to be ranked
// exactly: ingest says its chunks are outside the vector index, index
// builds it, and a second index finds nothing left to do.
func TestIngestThenIndex(t *testing.T) {
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "MCP_docs_chunk_size": "100", "MCP_docs_chunk_overlap": "0"}
	var text strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&text, "Section %d covers the replica %d failover drill in plain words. ", i, i%97)
	}
	path := filepath.Join(t.TempDir(), "manual.txt")
	if err := os.WriteFile(path, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "manual", path)
	if err != nil || !strings.Contains(out, "1 ingested") {
		t.Fatalf("ingest: %v\n%s\n%s", err, out, errOut)
	}
	if !strings.Contains(errOut, "not in the vector index yet") || !strings.Contains(errOut, "mcpsearch index") {
		t.Errorf("ingest does not say the index is behind:\n%s", errOut)
	}
	out, errOut, err = runCLI(t, vars, "index")
	if err != nil || !strings.HasPrefix(out, "built chunks_hnsw_local_hash_v1_384_384_") {
		t.Fatalf("index: %v\n%s\n%s", err, out, errOut)
	}
	conn, err := pgx.Connect(t.Context(), vars["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var name string
	var covered, chunks int
	if err := conn.QueryRow(t.Context(), `SELECT index_name, chunk_count, (SELECT count(*) FROM chunks) FROM vector_indexes`).Scan(&name, &covered, &chunks); err != nil {
		t.Fatal(err)
	}
	if chunks <= 2000 || covered != chunks || !strings.Contains(out, name) {
		t.Errorf("vector_indexes names %s covering %d of %d chunks; index printed %q", name, covered, chunks, out)
	}
	out, _, err = runCLI(t, vars, "index")
	if err != nil || !strings.Contains(out, "already covers every chunk") {
		t.Errorf("second index: %v %q", err, out)
	}
}

// TestIngestOfficeFiles ingests a folder of office files named so that only
// their content tells what they are, and a legacy Word file: the first are
// read, the last skipped saying what to do.
func TestIngestOfficeFiles(t *testing.T) {
	vars := map[string]string{"DATABASE_URL": pgtest.NewDatabase(t), "MCP_docs_ocr_mode": "off"}
	dir := t.TempDir()
	for from, to := range map[string]string{"deck.pptx": "deck", "budget.xlsx": "budget.dat", "contract.odt": "contract", "contract.doc": "old.doc"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "extract", "testdata", "formats", from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "office", dir)
	if err != nil || !strings.HasPrefix(out, "3 ingested, 0 already present, 0 failed, 1 skipped;") {
		t.Fatalf("ingest: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if line := "skipped " + filepath.Join(dir, "old.doc") + ": unsupported type: legacy Word 97-2003 document (.doc): save it as .docx"; !strings.Contains(errOut, line) {
		t.Errorf("stderr lacks %q:\n%s", line, errOut)
	}
}
