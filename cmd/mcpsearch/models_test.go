package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/embed/model2vec"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// fixtureRevision is the commit the fixture hub names for its repository.
const fixtureRevision = "0123456789abcdef0123456789abcdef01234567"

// fixtureModelFiles are the files of a small model2vec model the embed
// packages' tests made (16 dimensions, a WordPiece vocabulary).
var fixtureModelFiles = []string{"config.json", "tokenizer.json", "model.safetensors"}

// fakeHub is a stand-in for the Hugging Face hub: it serves the fixture
// model as the repository org/tiny at fixtureRevision (and at "main"), with
// the hub's API for resolving a revision and listing files, and serves the
// same bytes at the pinned revision of the catalogue's potion-base-8M, whose
// checksums they do not match.
type fakeHub struct {
	*httptest.Server
	files map[string][]byte

	mu       sync.Mutex
	requests []string // paths of file downloads, with " range" when resumed
	// cutOnce, when set, names a file whose next download is broken off
	// halfway.
	cutOnce string
	// corrupt, when set, names a file served with one byte changed.
	corrupt string
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{files: map[string][]byte{}}
	var tree []string
	for _, n := range fixtureModelFiles {
		b, err := os.ReadFile(filepath.Join(repoRoot, "embed", "model2vec", "testdata", "f32", n))
		if err != nil {
			t.Fatal(err)
		}
		h.files[n] = b
		tree = append(tree, fmt.Sprintf(`{"type":"file","oid":"%040x","size":%d,"path":%q,"lfs":{"oid":"%x","size":%d}}`, 1, len(b), n, sha256.Sum256(b), len(b)))
	}
	base8M, _ := model2vec.Find("potion-base-8M")
	prefixes := []string{"/org/tiny/resolve/" + fixtureRevision + "/", "/" + base8M.Snapshot.Repo + "/resolve/" + base8M.Snapshot.Revision + "/"}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/org/tiny/revision/main", "/api/models/org/tiny/revision/" + fixtureRevision:
			fmt.Fprintf(w, `{"sha": %q}`, fixtureRevision)
			return
		case "/api/models/org/tiny/tree/" + fixtureRevision:
			fmt.Fprintf(w, "[%s]", strings.Join(tree, ","))
			return
		}
		var name string
		for _, p := range prefixes {
			if n, ok := strings.CutPrefix(r.URL.Path, p); ok {
				name = n
			}
		}
		b, ok := h.files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.mu.Lock()
		req := name
		if r.Header.Get("Range") != "" {
			req += " range"
		}
		h.requests = append(h.requests, req)
		cut := h.cutOnce == name
		if cut {
			h.cutOnce = ""
		}
		if h.corrupt == name {
			b = bytes.Clone(b)
			b[len(b)/2] ^= 0x20
		}
		h.mu.Unlock()
		if cut {
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			// The connection breaks before the end of the body.
			panic(http.ErrAbortHandler)
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(h.Close)
	return h
}

// downloads returns the file downloads since the last call.
func (h *fakeHub) downloads() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.requests
	h.requests = nil
	return out
}

func (h *fakeHub) set(cutOnce, corrupt string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutOnce, h.corrupt = cutOnce, corrupt
}

// TestModelsPullList pulls a model from a stand-in hub through the CLI as a
// user runs it, and checks what pull and list say and do: a second pull
// downloads nothing, a damaged model is reported and repaired, a download
// broken off resumes where it stopped, a file that does not match its
// checksum is refused, and the configured model loads.
func TestModelsPullList(t *testing.T) {
	h := newFakeHub(t)
	dir := filepath.Join(t.TempDir(), "models")
	vars := map[string]string{"MCP_embed_hub_url": h.URL, "MCP_embed_models_dir": dir}

	out, errOut, err := runCLI(t, vars, "models", "pull", "org/tiny")
	if err != nil {
		t.Fatalf("pull: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out, "installed org--tiny (org/tiny@0123456789ab) in "+filepath.Join(dir, "org--tiny")) {
		t.Errorf("pull stdout:\n%s", out)
	}
	// Not on a terminal: a line per file, no bar.
	for _, n := range fixtureModelFiles {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(n) + ` +[0-9.]+ MB  done$`).MatchString(errOut) {
			t.Errorf("pull stderr lacks a line for %s:\n%s", n, errOut)
		}
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("pull drew a bar on a pipe:\n%q", errOut)
	}
	if got := h.downloads(); len(got) != 3 {
		t.Errorf("pull downloaded %q, want the 3 files", got)
	}
	for _, n := range append(fixtureModelFiles, "manifest.json") {
		if _, err := os.Stat(filepath.Join(dir, "org--tiny", n)); err != nil {
			t.Errorf("after pull: %v", err)
		}
	}

	// Again: nothing to download, and nothing asked of the hub at all.
	offline := map[string]string{"MCP_embed_hub_url": "http://127.0.0.1:1", "MCP_embed_models_dir": dir}
	out, _, err = runCLI(t, offline, "models", "pull", "org/tiny")
	if err != nil || !strings.Contains(out, "org--tiny (org/tiny@0123456789ab) is installed and intact") || len(h.downloads()) != 0 {
		t.Fatalf("second pull: %v\n%s", err, out)
	}

	// list: the catalogue, the pulled model, and the configured one loaded.
	configured := map[string]string{"MCP_embed_models_dir": dir, "MCP_embed_provider": "model2vec", "MCP_embed_model": "org/tiny"}
	out, _, err = runCLI(t, configured, "models", "list")
	if err != nil {
		t.Fatalf("list: %v\n%s", err, out)
	}
	for _, want := range []string{"models folder: " + dir, "potion-retrieval-32M", "not installed (default)", "potion-base-8M",
		"org--tiny", "installed (configured)", "org/tiny@0123456789ab",
		"configured: MCP_embed_model=org/tiny, which loads as model2vec:org/tiny@0123456789ab (16 dimensions)"} {
		if !strings.Contains(out, want) {
			t.Errorf("list lacks %q:\n%s", want, out)
		}
	}
	// Without a name, pull takes the configured model.
	out, _, err = runCLI(t, configured, "models", "pull")
	if err != nil || !strings.Contains(out, "is installed and intact") {
		t.Errorf("pull of the configured model: %v\n%s", err, out)
	}

	// A damaged file: list says so and fails for the configured model;
	// the embedder refuses to start; pull downloads the model again.
	p := filepath.Join(dir, "org--tiny", "model.safetensors")
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 0x40
	os.WriteFile(p, b, 0o644)
	out, _, err = runCLI(t, configured, "models", "list")
	if err == nil || !strings.Contains(out, "damaged: run mcpsearch models pull org/tiny") || !strings.Contains(err.Error(), "models pull") {
		t.Errorf("list of a damaged model: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, map[string]string{"MCP_embed_models_dir": dir, "MCP_embed_provider": "model2vec", "MCP_embed_model": "org/tiny",
		"DATABASE_URL": "postgres://u:p@127.0.0.1:1/db?connect_timeout=1"}, "index")
	if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), "models pull") {
		t.Errorf("index with a damaged model: %v; want a start-up error saying to pull again", err)
	}
	out, _, err = runCLI(t, vars, "models", "pull", "org/tiny")
	if err != nil || !strings.Contains(out, "installed org--tiny") || len(h.downloads()) != 3 {
		t.Fatalf("pull repairing a damaged model: %v\n%s", err, out)
	}

	// A download broken off halfway fails, keeps what arrived, and the
	// next pull resumes it with a range request.
	other := filepath.Join(t.TempDir(), "other")
	h.set("model.safetensors", "")
	_, errOut, err = runCLI(t, vars, "models", "pull", "org/tiny@main", "--embed-models-dir", other)
	if err == nil || !strings.Contains(errOut, "run again to resume") {
		t.Fatalf("broken download: %v\n%s", err, errOut)
	}
	if _, err := os.Stat(filepath.Join(other, "org--tiny")); err == nil {
		t.Fatal("a broken download was installed")
	}
	h.downloads()
	out, _, err = runCLI(t, vars, "models", "pull", "--embed-models-dir", other, "org/tiny")
	if got := h.downloads(); err != nil || len(got) != 1 || got[0] != "model.safetensors range" {
		t.Errorf("resumed pull: %v, downloads %q; want model.safetensors alone, resumed\n%s", err, got, out)
	}

	// A file that does not match its checksum is refused, and nothing is
	// installed.
	h.set("", "tokenizer.json")
	bad := filepath.Join(t.TempDir(), "bad")
	_, errOut, err = runCLI(t, vars, "models", "pull", "--embed-models-dir", bad, "org/tiny")
	if err == nil || !strings.Contains(errOut, "checksum mismatch: tokenizer.json") {
		t.Errorf("corrupt download: %v\n%s", err, errOut)
	}
	if _, err := os.Stat(filepath.Join(bad, "org--tiny")); err == nil {
		t.Error("a model with a bad file was installed")
	}
	// A catalogue model is pinned to its checksums: other bytes at its
	// revision are refused.
	h.set("", "")
	_, errOut, err = runCLI(t, vars, "models", "pull", "--embed-models-dir", bad, "potion-base-8M")
	if err == nil || !strings.Contains(errOut, "checksum mismatch: config.json") {
		t.Errorf("catalogue model with other bytes: %v\n%s", err, errOut)
	}
}

// TestModelsConfigured checks pull and list for the settings that need no
// download, and the start-up error of a model that was never pulled.
func TestModelsConfigured(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runCLI(t, map[string]string{"MCP_embed_models_dir": dir}, "models", "pull")
	if err != nil || !strings.Contains(out, "MCP_embed_provider is local") {
		t.Errorf("pull with the local embedder: %v\n%s", err, out)
	}

	// A folder copied by hand: nothing to pull, and it loads.
	hand := filepath.Join(t.TempDir(), "my-model")
	os.Mkdir(hand, 0o755)
	for _, n := range fixtureModelFiles {
		b, err := os.ReadFile(filepath.Join(repoRoot, "embed", "model2vec", "testdata", "f32", n))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(hand, n), b, 0o644)
	}
	vars := map[string]string{"MCP_embed_models_dir": dir, "MCP_embed_provider": "model2vec", "MCP_embed_model_dir": hand}
	out, _, err = runCLI(t, vars, "models", "pull")
	if err != nil || !strings.Contains(out, "holds model2vec:my-model@sha256-") {
		t.Errorf("pull with a model folder: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, vars, "models", "list")
	if err != nil || !strings.Contains(out, "configured: MCP_embed_model_dir="+hand+", which loads as model2vec:my-model@sha256-") {
		t.Errorf("list with a model folder: %v\n%s", err, out)
	}
	// A model folder is for model2vec only.
	_, _, err = runCLI(t, map[string]string{"MCP_embed_model_dir": hand}, "models", "list")
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "MCP_embed_provider=model2vec") {
		t.Errorf("model folder with the local embedder: %v", err)
	}

	// Configured but never pulled: a start-up error naming the command.
	vars = map[string]string{"MCP_embed_models_dir": dir, "MCP_embed_provider": "model2vec", "DATABASE_URL": "postgres://u:p@127.0.0.1:1/db?connect_timeout=1"}
	for _, cmd := range [][]string{{"index"}, {"reembed"}, {"models", "list"}} {
		_, _, err = runCLI(t, vars, cmd...)
		if err == nil || !strings.Contains(err.Error(), "run `mcpsearch models pull potion-retrieval-32M`") {
			t.Errorf("%s without the model: %v; want an error naming the pull", cmd, err)
		}
	}
	// The default folder follows XDG_DATA_HOME, then HOME.
	for env, want := range map[string]string{"XDG_DATA_HOME": "/data/x/mcpsearch/models", "HOME": "/home/u/.local/share/mcpsearch/models"} {
		root := strings.TrimSuffix(strings.TrimSuffix(want, "/mcpsearch/models"), "/.local/share")
		out, _, err := runCLI(t, map[string]string{env: root}, "models", "list")
		if err != nil || !strings.Contains(out, "models folder: "+want+"\n") {
			t.Errorf("%s=%s: %v\n%s", env, root, err, out)
		}
	}
	if _, _, err := runCLI(t, nil, "models", "list"); err == nil || !strings.Contains(err.Error(), "MCP_embed_models_dir") {
		t.Errorf("list without a models folder: %v", err)
	}
}

// TestReembedToPulledModel moves a conversation's chunks from the local
// embedder to a pulled model2vec model, as a user changing model does, and
// checks what reembed reports, that a second run has nothing to move, and
// that the chunks are found with the new model.
func TestReembedToPulledModel(t *testing.T) {
	h := newFakeHub(t)
	models := filepath.Join(t.TempDir(), "models")
	db := pgtest.NewDatabase(t)
	local := map[string]string{"DATABASE_URL": db}
	dir := t.TempDir()
	for i := range 5 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("note%d.txt", i)), []byte(fmt.Sprintf("Note %d: the hello world of tomatoes, number %d.", i, i)), 0o644)
	}
	if out, _, err := runCLI(t, local, "ingest", "--conversation", "c", dir); err != nil {
		t.Fatalf("ingest: %v\n%s", err, out)
	}
	static := map[string]string{"DATABASE_URL": db, "MCP_embed_provider": "model2vec", "MCP_embed_model": "org/tiny", "MCP_embed_models_dir": models}
	if _, _, err := runCLI(t, static, "reembed"); err == nil || !strings.Contains(err.Error(), "models pull org/tiny") {
		t.Fatalf("reembed before the pull: %v", err)
	}
	if _, _, err := runCLI(t, map[string]string{"MCP_embed_hub_url": h.URL, "MCP_embed_models_dir": models}, "models", "pull", "org/tiny"); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, static, "reembed")
	if err != nil || !strings.Contains(out, "every chunk now uses model2vec:org/tiny@0123456789ab (16 dimensions): 5 chunks moved") ||
		!strings.Contains(errOut, "reembed: moving 5 chunks to model2vec:org/tiny@0123456789ab") || !strings.Contains(errOut, "chunks 5/5") {
		t.Fatalf("reembed: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	out, _, err = runCLI(t, static, "reembed")
	if err != nil || !strings.Contains(out, "nothing to move") {
		t.Errorf("second reembed: %v\n%s", err, out)
	}
	// The index command sees the chunks under the new model.
	out, _, err = runCLI(t, static, "index")
	if err != nil || !strings.Contains(out, "model2vec:org/tiny@0123456789ab") {
		t.Errorf("index after reembed: %v\n%s", err, out)
	}
}
