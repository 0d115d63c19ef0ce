package model2vec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/embed/hub"
)

const fixtureRev = "fedcba9876543210fedcba9876543210fedcba98"

// fixtureHub serves the files of testdata/f32 as the repository org/tiny at
// fixtureRev, and returns a catalogue-like entry for it.
func fixtureHub(t *testing.T) (*hub.Client, Known) {
	t.Helper()
	k := Known{Name: "tiny", Snapshot: hub.Snapshot{Repo: "org/tiny", Revision: fixtureRev}}
	files := map[string][]byte{}
	var tree []string
	for _, n := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("testdata", "f32", n))
		if err != nil {
			t.Fatal(err)
		}
		files["/org/tiny/resolve/"+fixtureRev+"/"+n] = b
		tree = append(tree, fmt.Sprintf(`{"type":"file","oid":"%040x","size":%d,"path":%q,"lfs":{"oid":"%x","size":%d}}`, 1, len(b), n, sha256.Sum256(b), len(b)))
		sum := sha256.Sum256(b)
		k.Snapshot.Files = append(k.Snapshot.Files, hub.File{Name: n, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/models/org/tiny/revision/main":
			fmt.Fprintf(w, `{"sha": %q}`, fixtureRev)
			return
		case "/api/models/org/tiny/tree/" + fixtureRev:
			fmt.Fprintf(w, "[%s]", strings.Join(tree, ","))
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	return &hub.Client{BaseURL: srv.URL, HTTP: srv.Client()}, k
}

func copyFixture(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("testdata", "f32", n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPullListOpen(t *testing.T) {
	c, k := fixtureHub(t)
	store := Store{Dir: filepath.Join(t.TempDir(), "models")}
	if got, err := store.List(); err != nil || len(got) != 0 {
		t.Fatalf("List of a missing folder = %v, %v", got, err)
	}
	if err := store.Check(k); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Check before the pull: %v, want ErrNotFound", err)
	}
	var last hub.Progress
	if pulled, err := store.Pull(context.Background(), c, k, func(p hub.Progress) { last = p }); err != nil || !pulled {
		t.Fatalf("Pull: %v, %v", pulled, err)
	}
	if last.Done != k.Snapshot.Bytes() {
		t.Errorf("progress ended at %+v", last)
	}
	if err := store.Check(k); err != nil {
		t.Fatalf("Check after the pull: %v", err)
	}
	// A second pull finds the model in place and asks the hub nothing.
	offline := &hub.Client{BaseURL: "http://127.0.0.1:1"}
	if pulled, err := store.Pull(context.Background(), offline, k, nil); err != nil || pulled {
		t.Fatalf("second Pull: %v, %v; want nothing to do", pulled, err)
	}
	list, err := store.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if in := list[0]; in.Name != "tiny" || in.Repo != "org/tiny" || in.Revision != fixtureRev || in.Bytes != k.Snapshot.Bytes() || in.Problem != "" {
		t.Errorf("List()[0] = %+v", in)
	}

	m, err := Open(OpenConfig{Model: "tiny", Store: store})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if want := "model2vec:org/tiny@fedcba987654"; m.Model() != want {
		t.Errorf("Model() = %q, want %q", m.Model(), want)
	}
	if v, err := m.Embed(context.Background(), []string{"hello world"}); err != nil || len(v[0]) != 16 {
		t.Errorf("Embed: %v %v", v, err)
	}

	// A damaged file is found at the next start, with the cure.
	p := filepath.Join(store.Path("tiny"), "model.safetensors")
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 0x40
	os.WriteFile(p, b, 0o644)
	if _, err := Open(OpenConfig{Model: "tiny", Store: store}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "models pull") {
		t.Fatalf("Open of a damaged model: %v, want ErrCorrupt saying to pull again", err)
	}
	if err := store.Check(k); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check of a damaged model: %v, want ErrCorrupt", err)
	}
	// Pulling again repairs it.
	if pulled, err := store.Pull(context.Background(), c, k, nil); err != nil || !pulled {
		t.Fatal(pulled, err)
	}
	if _, err := Open(OpenConfig{Model: "tiny", Store: store}); err != nil {
		t.Fatalf("Open after a new pull: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	store := Store{Dir: t.TempDir()}
	tests := []struct {
		name    string
		cfg     OpenConfig
		setup   func(t *testing.T)
		wantErr error
		wantMsg string
	}{
		{"default not pulled", OpenConfig{Store: store}, nil, ErrNotFound, "run `mcpsearch models pull potion-retrieval-32M`"},
		{"by repository name", OpenConfig{Model: "minishlab/potion-base-8M", Store: store}, nil, ErrNotFound, "potion-base-8M is not installed"},
		{"unknown name", OpenConfig{Model: "mine", Store: store}, nil, ErrNotFound, "copy a model2vec folder there"},
		{"no folders at all", OpenConfig{Model: "x"}, nil, ErrNotFound, "no models folder"},
		{"dir missing", OpenConfig{Dir: filepath.Join(store.Dir, "nope")}, nil, ErrNotFound, "nope"},
		{"dir without model", OpenConfig{Dir: store.Dir}, nil, ErrNotFound, "has no config.json"},
		{"hand copy claiming a catalogue model", OpenConfig{Model: "potion-base-8M", Store: store}, func(t *testing.T) {
			copyFixture(t, store.Path("potion-base-8M"))
		}, ErrCorrupt, "does not hold minishlab/potion-base-8M at revision bf8b056651a2c21b8d2565580b8569da283cab23"},
		{"bad manifest", OpenConfig{Model: "broken", Store: store}, func(t *testing.T) {
			copyFixture(t, store.Path("broken"))
			os.WriteFile(filepath.Join(store.Path("broken"), hub.ManifestName), []byte("{"), 0o644)
		}, ErrCorrupt, hub.ManifestName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t)
			}
			_, err := Open(tt.cfg)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Open: %v, want %v mentioning %q", err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

// TestOpenHandCopy checks that a folder copied in by hand, with no
// manifest, loads under its own name and a digest of its files.
func TestOpenHandCopy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mine")
	copyFixture(t, dir)
	a, err := Open(OpenConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.Model(), "model2vec:mine@sha256-") {
		t.Errorf("Model() = %q", a.Model())
	}
	b, err := Open(OpenConfig{Model: "my-model", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.Model(), "model2vec:my-model@sha256-") || b.Model()[len(b.Model())-12:] != a.Model()[len(a.Model())-12:] {
		t.Errorf("Model() = %q next to %q", b.Model(), a.Model())
	}
	list, err := Store{Dir: filepath.Dir(dir)}.List()
	if err != nil || len(list) != 1 || list[0].Problem != "" || list[0].Revision != "" || list[0].Bytes == 0 {
		t.Errorf("List = %+v, %v", list, err)
	}
}

func TestCatalogue(t *testing.T) {
	cat := Catalogue()
	if len(cat) < 2 || cat[0].Name != DefaultModel {
		t.Fatalf("catalogue %+v, want the default first", cat)
	}
	for _, k := range cat {
		if err := k.Snapshot.Validate(); err != nil {
			t.Errorf("%s: %v", k.Name, err)
		}
		got, ok := Find(strings.ToUpper(k.Snapshot.Repo))
		if !ok || got.Name != k.Name {
			t.Errorf("Find(%q) = %v, %v", k.Snapshot.Repo, got.Name, ok)
		}
		// The safetensors size is the header plus rows x dims float32s;
		// a wrong dimension or size in the table shows here.
		for _, f := range k.Snapshot.Files {
			if f.Name == "model.safetensors" && (f.Size-88)%int64(4*k.Dimensions) != 0 {
				t.Errorf("%s: %d bytes is not a whole number of %d-dimension rows", k.Name, f.Size, k.Dimensions)
			}
		}
	}
}

// TestResolvePullRepo checks a model outside the catalogue: pinned on the
// hub at pull time, installed as owner--name, opened by its repository.
func TestResolvePullRepo(t *testing.T) {
	c, want := fixtureHub(t)
	k, err := Resolve(context.Background(), c, "org/tiny")
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if k.Name != "org--tiny" || k.Snapshot.Revision != fixtureRev || k.Snapshot.Files[2].SHA256 != want.Snapshot.Files[2].SHA256 {
		t.Fatalf("Resolve = %+v", k)
	}
	store := Store{Dir: t.TempDir()}
	if _, err := Open(OpenConfig{Model: "org/tiny", Store: store}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "models pull org/tiny") {
		t.Fatalf("Open before the pull: %v", err)
	}
	if _, err := store.Pull(context.Background(), c, k, nil); err != nil {
		t.Fatal(err)
	}
	m, err := Open(OpenConfig{Model: "org/tiny", Store: store})
	if err != nil {
		t.Fatal(err)
	}
	if m.Model() != "model2vec:org/tiny@fedcba987654" {
		t.Errorf("Model() = %q", m.Model())
	}
	for _, ref := range []string{"potion-base-8M", "MINISHLAB/potion-base-8M", "minishlab/potion-base-8M@bf8b056651a2c21b8d2565580b8569da283cab23"} {
		if k, err := Resolve(context.Background(), c, ref); err != nil || k.Name != "potion-base-8M" {
			t.Errorf("Resolve(%q) = %v, %v; want the catalogue entry without asking the hub", ref, k.Name, err)
		}
	}
	if _, err := Resolve(context.Background(), c, "nonsense"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "potion-retrieval-32M") {
		t.Errorf("Resolve(nonsense): %v", err)
	}
}
