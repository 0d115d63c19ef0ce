package model2vec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mcpsearch/mcpsearch/embed/hub"
)

// DefaultModel is the catalogue model used when none is named.
const DefaultModel = "potion-retrieval-32M"

// Known is a model pinned for download, from the catalogue or pinned by
// Resolve: a hub repository at one commit, with the size and checksum of
// each file model2vec reads.
type Known struct {
	// Name is the short name used in settings and commands.
	Name string
	// Description says what the model is for, for `models list`.
	Description string
	// Dimensions is the length of its vectors.
	Dimensions int
	// Snapshot is what is downloaded.
	Snapshot hub.Snapshot
}

// The catalogue. Revisions are commits of the hub repositories; sizes and
// SHA-256s are those of the files at those commits (the LFS object id for
// model.safetensors). Both models are MIT-licensed by their authors.
var catalogue = []Known{
	{
		Name:        "potion-retrieval-32M",
		Description: "English, tuned for retrieval; 63,091 tokens x 512 dimensions, float32, 129 MB (the default)",
		Dimensions:  512,
		Snapshot: hub.Snapshot{
			Repo:     "minishlab/potion-retrieval-32M",
			Revision: "6fc8051fab2a1e0ee76689cf08c853792ac285e7",
			Files: []hub.File{
				{Name: "config.json", Size: 202, SHA256: "63c00d90824c832c04ec1d02b6a983fb90489bf049f29fbff15ba481b8a432ee"},
				{Name: "tokenizer.json", Size: 1_493_150, SHA256: "7d75cbc54318138807c401b0f0c9721117c628b39de8e8e0edb6cb17e0ee7d18"},
				{Name: "model.safetensors", Size: 129_210_456, SHA256: "07609e5bd33aad37900b3fd62f4ec96f6daec88ca4d46b9d8b928bfababf6ea0"},
			},
		},
	},
	{
		Name:        "potion-base-8M",
		Description: "English, general purpose, small; 29,528 tokens x 256 dimensions, float32, 30 MB",
		Dimensions:  256,
		Snapshot: hub.Snapshot{
			Repo:     "minishlab/potion-base-8M",
			Revision: "bf8b056651a2c21b8d2565580b8569da283cab23",
			Files: []hub.File{
				{Name: "config.json", Size: 202, SHA256: "2a6ac0e9aaa356a68a5688070db78fc3a464fefe85d2f06a1905ce3718687553"},
				{Name: "tokenizer.json", Size: 683_666, SHA256: "e67e803f624fb4d67dea1c730d06e1067e1b14d830e2c2202569e3ef0f70bb50"},
				{Name: "model.safetensors", Size: 30_236_760, SHA256: "f65d0f325faadc1e121c319e2faa41170d3fa07d8c89abd48ca5358d9a223de2"},
			},
		},
	},
}

// Catalogue lists the known models, the default first.
func Catalogue() []Known {
	out := make([]Known, len(catalogue))
	copy(out, catalogue)
	return out
}

// Find returns the catalogue model named name, by short name or by
// repository ("minishlab/potion-base-8M"), ignoring case.
func Find(name string) (Known, bool) {
	for _, k := range catalogue {
		if strings.EqualFold(name, k.Name) || strings.EqualFold(name, k.Snapshot.Repo) {
			return k, true
		}
	}
	return Known{}, false
}

// FolderName is the folder of the store that holds the model ref: the
// catalogue name of a catalogue model, "owner--name" for another hub
// repository "owner/name" (a revision after "@" aside), ref itself for a
// folder copied in by hand.
func FolderName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if k, ok := Find(ref); ok {
		return k.Name
	}
	return strings.ReplaceAll(ref, "/", "--")
}

// Resolve returns what to pull for ref: a catalogue model (by name or
// repository), or any model2vec repository of the hub as "owner/name" or
// "owner/name@revision" (a branch, tag or commit; main when absent),
// pinned at once to the commit the hub gives and to the checksums the hub
// lists for its config.json, tokenizer.json and model.safetensors. Only
// catalogue models have checksums known in advance.
func Resolve(ctx context.Context, c *hub.Client, ref string) (Known, error) {
	ref = strings.TrimSpace(ref)
	if k, ok := Find(ref); ok {
		return k, nil
	}
	repo, rev, _ := strings.Cut(ref, "@")
	if k, ok := Find(repo); ok && (rev == "" || rev == k.Snapshot.Revision) {
		return k, nil
	}
	if !strings.Contains(repo, "/") {
		names := make([]string, len(catalogue))
		for i, k := range catalogue {
			names[i] = k.Name
		}
		return Known{}, fmt.Errorf("%w: %q is neither a catalogue model (%s) nor a hub repository owner/name", ErrNotFound, ref, strings.Join(names, ", "))
	}
	snap, err := c.Resolve(ctx, repo, rev, []string{"config.json", "tokenizer.json", "model.safetensors"})
	if err != nil {
		return Known{}, err
	}
	return Known{Name: FolderName(repo), Description: "pulled from " + repo, Snapshot: snap}, nil
}

// Store is a folder of installed models, one subfolder per model named as
// the catalogue names it, each with the hub.ManifestName file Pull writes.
type Store struct {
	Dir string
}

// Path is the folder of the model named name.
func (s Store) Path(name string) string {
	return filepath.Join(s.Dir, name)
}

// Pull downloads k into the store, replacing any other install of it once
// the new one is complete. An interrupted pull resumes where it stopped. A
// model already installed at k's revision with intact files is left as it
// is, without a request: pulled reports whether anything was downloaded.
func (s Store) Pull(ctx context.Context, c *hub.Client, k Known, progress func(hub.Progress)) (pulled bool, err error) {
	if s.Dir == "" {
		return false, fmt.Errorf("%w: no models folder set", ErrNotFound)
	}
	if s.Check(k) == nil {
		return false, nil
	}
	if err := c.Install(ctx, k.Snapshot, s.Path(k.Name), progress); err != nil {
		return false, fmt.Errorf("pull %s: %w", k.Name, err)
	}
	return true, nil
}

// Check reports whether k is installed at its revision with every file of
// the expected size and SHA-256: nil if so, otherwise an error wrapping
// ErrNotFound (not installed, or another revision) or ErrCorrupt.
func (s Store) Check(k Known) error {
	dir := s.Path(k.Name)
	snap, err := hub.ReadManifest(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s is not installed in %s", ErrNotFound, k.Name, s.Dir)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if snap.Repo != k.Snapshot.Repo || snap.Revision != k.Snapshot.Revision {
		return fmt.Errorf("%w: %s holds %s@%s, not %s@%s", ErrNotFound, dir, snap.Repo, snap.Revision, k.Snapshot.Repo, k.Snapshot.Revision)
	}
	installed := map[string]string{}
	for _, f := range snap.Files {
		installed[f.Name] = f.SHA256
	}
	for _, f := range k.Snapshot.Files {
		if f.SHA256 == "" {
			// Known by its git blob id only: the manifest holds the
			// SHA-256 computed when that id was checked.
			f.SHA256 = installed[f.Name]
		}
		if err := checkFile(filepath.Join(dir, filepath.FromSlash(f.Name)), f); err != nil {
			return err
		}
	}
	return nil
}

func checkFile(path string, f hub.File) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return fmt.Errorf("%w: read %s: %v", ErrCorrupt, path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if n != f.Size || sum != f.SHA256 {
		return fmt.Errorf("%w: %s is %d bytes with SHA-256 %s, want %d bytes with %s", ErrCorrupt, path, n, sum, f.Size, f.SHA256)
	}
	return nil
}

// Installed describes a model in the store.
type Installed struct {
	// Name is the folder's name, which is the catalogue name for models
	// pulled from the catalogue.
	Name string
	// Dir is the model's folder.
	Dir string
	// Repo and Revision come from the manifest; empty for a folder copied
	// in by hand without one.
	Repo, Revision string
	// Bytes is the size of the model's files.
	Bytes int64
	// Current reports whether the install is the catalogue's pinned
	// revision of a catalogue model.
	Current bool
	// Problem says what is wrong with the folder, if something is (no
	// manifest and no model files, an unreadable manifest); empty when it
	// looks usable. Checksums are checked by Open, not here.
	Problem string
}

// List returns the models of the store, sorted by name. A missing store
// folder holds no models.
func (s Store) List() ([]Installed, error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Installed
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		in := Installed{Name: e.Name(), Dir: s.Path(e.Name())}
		if snap, err := hub.ReadManifest(in.Dir); err == nil {
			in.Repo, in.Revision, in.Bytes = snap.Repo, snap.Revision, snap.Bytes()
			if k, ok := Find(in.Name); ok {
				in.Current = k.Snapshot.Revision == snap.Revision && k.Snapshot.Repo == snap.Repo
			}
		} else if errors.Is(err, os.ErrNotExist) {
			if _, lerr := findLayout(in.Dir); lerr != nil {
				in.Problem = "no model files"
			}
			in.Bytes = dirBytes(in.Dir)
		} else {
			in.Problem = err.Error()
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// OpenConfig selects a model to open.
type OpenConfig struct {
	// Model is a catalogue name, a hub repository "owner/name" pulled into
	// the store, or the name of a folder in the store; empty means
	// DefaultModel. The store's copy is used at the revision it was
	// pulled at, even if the catalogue now pins another (`models list`
	// shows it as not current), so that stored vectors never change
	// meaning under a new release. With Dir set, Model may be empty or a
	// name for that folder; a catalogue name must match its files.
	Model string
	// Dir is a model folder to load as it is (a model copied by hand to a
	// machine without network access). Empty means Store.Path(Model).
	Dir string
	// Store holds the models Pull installed.
	Store Store
	// MaxTokens caps the tokens of a text; 0 means DefaultMaxTokens.
	MaxTokens int
}

// Open loads the configured model and checks it: every file of a pulled
// model against its manifest, and a folder copied in by hand against the
// catalogue when it names a catalogue model. A missing folder is
// ErrNotFound and a file that does not match is ErrCorrupt, both with a
// message that says how to fix it; there is no fallback to another model.
func Open(cfg OpenConfig) (*Model, error) {
	name := strings.TrimSpace(cfg.Model)
	dir := cfg.Dir
	if dir == "" {
		if name == "" {
			name = DefaultModel
		}
		if k, ok := Find(name); ok {
			name = k.Name
		}
		if cfg.Store.Dir == "" {
			return nil, fmt.Errorf("%w: no models folder and no model folder set", ErrNotFound)
		}
		dir = cfg.Store.Path(FolderName(name))
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			hint := "copy a model2vec folder there"
			if _, ok := Find(name); ok || strings.Contains(name, "/") {
				hint = "run `mcpsearch models pull " + name + "`"
			}
			return nil, fmt.Errorf("%w: %s is not installed in %s (%s)", ErrNotFound, name, cfg.Store.Dir, hint)
		}
	}
	opts := Options{MaxTokens: cfg.MaxTokens}

	snap, err := hub.ReadManifest(dir)
	switch {
	case err == nil:
		opts.Name, opts.Revision = snap.Repo, snap.Revision
		opts.SHA256 = map[string]string{}
		for _, f := range snap.Files {
			opts.SHA256[f.Name] = f.SHA256
		}
		m, err := Load(dir, opts)
		if err != nil {
			return nil, fmt.Errorf("%w (run `mcpsearch models pull` again to repair it)", err)
		}
		return m, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}

	// No manifest: a folder copied in by hand. If it holds a catalogue
	// model's files it gets that model's name, so its vectors are those of
	// a pulled copy; if its name claims a catalogue model, it must hold it.
	m, err := Load(dir, opts)
	if err != nil {
		return nil, err
	}
	files := m.Files()
	for _, k := range catalogue {
		if matches(k.Snapshot, files) {
			m.name = "model2vec:" + k.Snapshot.Repo + "@" + k.Snapshot.Revision[:12]
			return m, nil
		}
	}
	if k, ok := Find(name); ok {
		return nil, fmt.Errorf("%w: %s does not hold %s at revision %s (its files' SHA-256 differ from the catalogue's); download it with `mcpsearch models pull %s` or leave the model name empty to use the folder as it is",
			ErrCorrupt, dir, k.Snapshot.Repo, k.Snapshot.Revision, k.Name)
	}
	if name != "" {
		m.name = "model2vec:" + name + "@sha256-" + m.digest()[:12]
	}
	return m, nil
}

func matches(s hub.Snapshot, files map[string]string) bool {
	if len(files) != len(s.Files) {
		return false
	}
	for _, f := range s.Files {
		if files[f.Name] != f.SHA256 {
			return false
		}
	}
	return true
}
