package hub

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const rev = "0123456789abcdef0123456789abcdef01234567"

// fakeHub serves files under /{repo}/resolve/{rev}/{name} with Range support,
// and can cut the first response of a file short.
type fakeHub struct {
	mu      sync.Mutex
	files   map[string][]byte // by name
	cutOnce map[string]int    // name -> bytes to send before dropping the connection, once
	stall   chan struct{}     // if set, a cut response hangs until it is closed instead
	ranges  []string          // Range headers received
	sent    int64
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/models/org/model/revision/main", "/api/models/org/model/revision/" + rev:
		fmt.Fprintf(w, `{"id": "org/model", "sha": %q}`, rev)
		return
	case "/api/models/org/model/tree/" + rev:
		h.mu.Lock()
		defer h.mu.Unlock()
		var entries []string
		for name, data := range h.files {
			sum := sha256.Sum256(data)
			if name == "model.safetensors" {
				entries = append(entries, fmt.Sprintf(`{"type":"file","oid":"%040x","size":%d,"path":%q,"lfs":{"oid":"%x","size":%d,"pointerSize":134}}`, 7, len(data), name, sum, len(data)))
				continue
			}
			blob := sha1.Sum(append([]byte(fmt.Sprintf("blob %d\x00", len(data))), data...))
			entries = append(entries, fmt.Sprintf(`{"type":"file","oid":"%x","size":%d,"path":%q}`, blob, len(data), name))
		}
		entries = append(entries, `{"type":"directory","oid":"0000000000000000000000000000000000000000","size":0,"path":"onnx"}`)
		fmt.Fprintf(w, "[%s]", strings.Join(entries, ","))
		return
	}
	prefix := "/org/model/resolve/" + rev + "/"
	name, ok := strings.CutPrefix(r.URL.Path, prefix)
	h.mu.Lock()
	data, found := h.files[name]
	cut, cutting := h.cutOnce[name]
	delete(h.cutOnce, name)
	if rg := r.Header.Get("Range"); rg != "" {
		h.ranges = append(h.ranges, rg)
	}
	h.mu.Unlock()
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	if cutting {
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.WriteHeader(http.StatusOK)
		w.Write(data[:cut])
		h.mu.Lock()
		h.sent += int64(cut)
		stall := h.stall
		h.mu.Unlock()
		if stall != nil {
			w.(http.Flusher).Flush()
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		}
		// Drop the connection mid-body, as a network failure would.
		panic(http.ErrAbortHandler)
	}
	cw := &countingWriter{ResponseWriter: w, h: h}
	http.ServeContent(cw, r, name, time.Time{}, bytes.NewReader(data))
}

type countingWriter struct {
	http.ResponseWriter
	h *fakeHub
}

func (c *countingWriter) Write(b []byte) (int, error) {
	c.h.mu.Lock()
	c.h.sent += int64(len(b))
	c.h.mu.Unlock()
	return c.ResponseWriter.Write(b)
}

func fileOf(name string, data []byte) File {
	sum := sha256.Sum256(data)
	return File{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

func setup(t *testing.T) (*fakeHub, *Client, Snapshot) {
	t.Helper()
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	files := map[string][]byte{
		"config.json":       []byte(`{"normalize": true}`),
		"tokenizer.json":    []byte(`{"model": {}}`),
		"model.safetensors": big,
	}
	h := &fakeHub{files: files, cutOnce: map[string]int{}}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := Snapshot{Repo: "org/model", Revision: rev}
	for _, n := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		s.Files = append(s.Files, fileOf(n, files[n]))
	}
	return h, &Client{BaseURL: srv.URL, HTTP: srv.Client()}, s
}

// noLeftovers checks that the parent of dest holds nothing but dest (and
// what keep names).
func noLeftovers(t *testing.T, dest string, keep ...string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dest))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		ok := e.Name() == filepath.Base(dest)
		for _, k := range keep {
			ok = ok || e.Name() == k
		}
		if !ok {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestInstall(t *testing.T) {
	h, c, s := setup(t)
	dest := filepath.Join(t.TempDir(), "models", "m")
	var last Progress
	calls := 0
	err := c.Install(context.Background(), s, dest, func(p Progress) {
		if p.Done < last.Done && p.File == last.File {
			t.Errorf("progress went back: %+v after %+v", p, last)
		}
		last = p
		calls++
	})
	if err != nil {
		t.Fatalf("Install: %v", err)
	}
	if last.Done != s.Bytes() || last.Total != s.Bytes() || calls < 3 {
		t.Errorf("last progress %+v after %d calls, want %d bytes", last, calls, s.Bytes())
	}
	for _, f := range s.Files {
		got, err := os.ReadFile(filepath.Join(dest, f.Name))
		if err != nil || !bytes.Equal(got, h.files[f.Name]) {
			t.Errorf("%s: %v, content differs", f.Name, err)
		}
	}
	m, err := ReadManifest(dest)
	if err != nil || m.Revision != rev || len(m.Files) != 3 {
		t.Errorf("manifest %+v, %v", m, err)
	}
	if _, err := os.Stat(filepath.Join(dest, stagingSnapshot)); !os.IsNotExist(err) {
		t.Errorf("staging record left in the install: %v", err)
	}
	noLeftovers(t, dest)
}

func TestInstallResume(t *testing.T) {
	h, c, s := setup(t)
	const cut = 300 << 10
	h.cutOnce["model.safetensors"] = cut
	dest := filepath.Join(t.TempDir(), "m")
	err := c.Install(context.Background(), s, dest, nil)
	if err == nil || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("interrupted Install: %v, want an error saying it can resume", err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Fatalf("destination exists after a failed install: %v", err)
	}
	st, err := os.Stat(filepath.Join(StagingDir(dest), "model.safetensors"))
	if err != nil || st.Size() != cut {
		t.Fatalf("partial file: %v, %v; want %d bytes kept", st, err, cut)
	}
	h.mu.Lock()
	h.sent = 0
	h.mu.Unlock()
	if err := c.Install(context.Background(), s, dest, nil); err != nil {
		t.Fatalf("resumed Install: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ranges) != 1 || h.ranges[0] != fmt.Sprintf("bytes=%d-", cut) {
		t.Errorf("Range headers %v, want one from byte %d", h.ranges, cut)
	}
	if want := int64(len(h.files["model.safetensors"]) - cut); h.sent != want {
		t.Errorf("second attempt downloaded %d bytes, want the missing %d", h.sent, want)
	}
	got, _ := os.ReadFile(filepath.Join(dest, "model.safetensors"))
	if !bytes.Equal(got, h.files["model.safetensors"]) {
		t.Error("resumed file differs")
	}
	noLeftovers(t, dest)
}

func TestInstallChecksumMismatch(t *testing.T) {
	h, c, s := setup(t)
	h.mu.Lock()
	h.files["model.safetensors"] = append([]byte{'X'}, h.files["model.safetensors"][1:]...)
	h.mu.Unlock()
	dest := filepath.Join(t.TempDir(), "m")
	err := c.Install(context.Background(), s, dest, nil)
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "model.safetensors") {
		t.Fatalf("Install: %v, want ErrChecksum naming the file", err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("destination exists after a failed install: %v", err)
	}
	if _, err := os.Stat(filepath.Join(StagingDir(dest), "model.safetensors")); !os.IsNotExist(err) {
		t.Errorf("bad file kept for resuming: %v", err)
	}
	// A longer file than announced is caught too.
	h.mu.Lock()
	s.Files[1] = fileOf("tokenizer.json", h.files["tokenizer.json"][:5])
	h.mu.Unlock()
	if err := c.Install(context.Background(), s, dest, nil); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Install of a longer file: %v, want ErrChecksum", err)
	}
}

func TestInstallNotFound(t *testing.T) {
	_, c, s := setup(t)
	s.Files = append(s.Files, fileOf("missing.bin", []byte("x")))
	dest := filepath.Join(t.TempDir(), "m")
	if err := c.Install(context.Background(), s, dest, nil); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("Install: %v, want ErrNotFound naming the file", err)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("destination exists after a failed install: %v", err)
	}
}

// TestInstallReplaces checks that a new install replaces an old one whole,
// and that a failed one leaves the old one untouched.
func TestInstallReplaces(t *testing.T) {
	h, c, s := setup(t)
	dest := filepath.Join(t.TempDir(), "m")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dest, "old.txt"), []byte("old"), 0o644)

	bad := s
	bad.Files = append([]File{}, s.Files...)
	bad.Files[0].SHA256 = strings.Repeat("0", 64)
	if err := c.Install(context.Background(), bad, dest, nil); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Install: %v, want ErrChecksum", err)
	}
	if b, err := os.ReadFile(filepath.Join(dest, "old.txt")); err != nil || string(b) != "old" {
		t.Fatalf("old install damaged by a failed one: %q %v", b, err)
	}

	if err := c.Install(context.Background(), s, dest, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dest, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old file survived the replacement: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "config.json")); !bytes.Equal(got, h.files["config.json"]) {
		t.Error("config.json not installed")
	}
	noLeftovers(t, dest)
}

func TestInstallCancelled(t *testing.T) {
	_, c, s := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dest := filepath.Join(t.TempDir(), "m")
	if err := c.Install(ctx, s, dest, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Install: %v, want context.Canceled", err)
	}
}

func TestValidate(t *testing.T) {
	good := Snapshot{Repo: "org/model", Revision: rev, Files: []File{{Name: "a/b.json", Size: 1, SHA256: strings.Repeat("a", 64)}}}
	tests := []struct {
		name string
		edit func(s *Snapshot)
		want string
	}{
		{"ok", func(s *Snapshot) {}, ""},
		{"branch revision", func(s *Snapshot) { s.Revision = "main" }, "commit hash"},
		{"bad repo", func(s *Snapshot) { s.Repo = "../x" }, "owner/name"},
		{"escaping name", func(s *Snapshot) { s.Files[0].Name = "../etc/passwd" }, "file name"},
		{"absolute name", func(s *Snapshot) { s.Files[0].Name = "/etc/passwd" }, "file name"},
		{"manifest name", func(s *Snapshot) { s.Files[0].Name = ManifestName }, "file name"},
		{"no checksum", func(s *Snapshot) { s.Files[0].SHA256 = "" }, "SHA-256"},
		{"no files", func(s *Snapshot) { s.Files = nil }, "no files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good
			s.Files = append([]File{}, good.Files...)
			tt.edit(&s)
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v, want ErrSnapshot mentioning %q", err, tt.want)
			}
		})
	}
}

// TestResolve checks pinning a repository from the hub's own metadata: the
// branch becomes its commit, LFS files are checked by SHA-256, the others by
// git blob id, and the manifest gets SHA-256s for all.
func TestResolve(t *testing.T) {
	h, c, want := setup(t)
	s, err := c.Resolve(context.Background(), "org/model", "", []string{"config.json", "tokenizer.json", "model.safetensors"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if s.Revision != rev || len(s.Files) != 3 {
		t.Fatalf("Resolve = %+v", s)
	}
	if s.Files[0].SHA256 != "" || s.Files[0].GitOID == "" || s.Files[2].SHA256 != want.Files[2].SHA256 {
		t.Errorf("files %+v, want git ids for small files and the LFS SHA-256 for the weights", s.Files)
	}
	dest := filepath.Join(t.TempDir(), "m")
	if err := c.Install(context.Background(), s, dest, nil); err != nil {
		t.Fatalf("Install: %v", err)
	}
	m, err := ReadManifest(dest)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		if f.SHA256 != want.Files[i].SHA256 {
			t.Errorf("manifest %s: SHA-256 %q, want %q", f.Name, f.SHA256, want.Files[i].SHA256)
		}
	}

	// A small file that is not the blob the hub listed is refused.
	h.mu.Lock()
	h.files["config.json"] = []byte(`{"normalize": false}`)
	h.mu.Unlock()
	if err := c.Install(context.Background(), s, filepath.Join(t.TempDir(), "m"), nil); !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "git blob id") {
		t.Fatalf("Install of a changed file: %v, want ErrChecksum on the git blob id", err)
	}

	for _, tt := range []struct {
		repo, rev string
		names     []string
		want      error
	}{
		{"org/model", "main", []string{"missing.json"}, ErrNotFound},
		{"org/other", "main", []string{"config.json"}, ErrNotFound},
		{"../x", "main", []string{"config.json"}, ErrSnapshot},
	} {
		if _, err := c.Resolve(context.Background(), tt.repo, tt.rev, tt.names); !errors.Is(err, tt.want) {
			t.Errorf("Resolve(%s, %v): %v, want %v", tt.repo, tt.names, err, tt.want)
		}
	}
}

// TestInstallStalled checks that a connection that goes quiet ends the
// download, keeping what arrived for the next attempt.
func TestInstallStalled(t *testing.T) {
	h, c, s := setup(t)
	const cut = 200 << 10
	stall := make(chan struct{})
	defer close(stall)
	h.mu.Lock()
	h.cutOnce["model.safetensors"] = cut
	h.stall = stall
	h.mu.Unlock()
	c.StallTimeout = 200 * time.Millisecond
	dest := filepath.Join(t.TempDir(), "m")
	err := c.Install(context.Background(), s, dest, nil)
	if err == nil || !strings.Contains(err.Error(), "no data received for 200ms") || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("Install: %v, want a stall error that offers to resume", err)
	}
	if st, err := os.Stat(filepath.Join(StagingDir(dest), "model.safetensors")); err != nil || st.Size() != cut {
		t.Fatalf("partial file: %v %v, want %d bytes kept", st, err, cut)
	}
	if err := c.Install(context.Background(), s, dest, nil); err != nil {
		t.Fatalf("resumed Install: %v", err)
	}
}
