// Package hub downloads model files from the Hugging Face hub at a pinned
// revision and installs them as a folder, all or nothing.
//
// A download goes to a staging folder beside the destination, named after it,
// so an interrupted one is resumed by the next call (with an HTTP Range
// request). Every file's size and SHA-256 are checked; files and folders are
// synced; the staging folder is then renamed into place, so the destination
// is either absent, the previous install, or complete, never half written.
package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is the Hugging Face hub.
const DefaultBaseURL = "https://huggingface.co"

// ManifestName is the file Install writes into every installed folder: the
// repository, the revision and each file's size and SHA-256.
const ManifestName = "manifest.json"

// Errors of Install; test with errors.Is.
var (
	// ErrNotFound means the hub has no such repository, revision or file
	// (HTTP 404), or the token lacks access to it.
	ErrNotFound = errors.New("not found on the hub")
	// ErrChecksum means a downloaded file's size or SHA-256 is not the one
	// expected. The file is removed, so the next attempt starts over.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrSnapshot means the snapshot description itself is invalid.
	ErrSnapshot = errors.New("invalid snapshot")
)

// File is one file of a repository.
type File struct {
	// Name is the path inside the repository, such as "model.safetensors".
	Name string `json:"name"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the file's contents (for a Git LFS file,
	// its LFS object id).
	SHA256 string `json:"sha256"`
	// GitOID is the hex SHA-1 git gives the file as a blob, which is all
	// the hub says of a file not stored with LFS. It is used when SHA256 is
	// empty; the SHA-256 is then computed on download and written to the
	// manifest.
	GitOID string `json:"git_oid,omitempty"`
}

// Snapshot is a set of files of one repository at one commit.
type Snapshot struct {
	// Repo is "owner/name".
	Repo string `json:"repo"`
	// Revision is the full 40-character commit hash: a branch name could
	// move under a pinned model.
	Revision string `json:"revision"`
	Files    []File `json:"files"`
}

// Bytes is the total size of the files.
func (s Snapshot) Bytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

var (
	repoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	revRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	shaRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	oidRE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// Validate checks that s names a repository, a commit and files with sizes
// and checksums, and that no file name leaves the folder.
func (s Snapshot) Validate() error {
	if !repoRE.MatchString(s.Repo) || strings.Contains(s.Repo, "..") {
		return fmt.Errorf("%w: repository %q is not owner/name", ErrSnapshot, s.Repo)
	}
	if !revRE.MatchString(s.Revision) {
		return fmt.Errorf("%w: revision %q is not a 40-character commit hash", ErrSnapshot, s.Revision)
	}
	if len(s.Files) == 0 {
		return fmt.Errorf("%w: no files", ErrSnapshot)
	}
	seen := map[string]bool{}
	for _, f := range s.Files {
		clean := path.Clean(f.Name)
		if f.Name == "" || clean != f.Name || path.IsAbs(f.Name) || strings.HasPrefix(clean, "../") || clean == ".." || clean == "." || f.Name == ManifestName || strings.Contains(f.Name, "\\") {
			return fmt.Errorf("%w: file name %q", ErrSnapshot, f.Name)
		}
		if seen[f.Name] {
			return fmt.Errorf("%w: file %q listed twice", ErrSnapshot, f.Name)
		}
		seen[f.Name] = true
		if f.Size <= 0 || !shaRE.MatchString(f.SHA256) && !(f.SHA256 == "" && oidRE.MatchString(f.GitOID)) {
			return fmt.Errorf("%w: file %q needs a size and a hex SHA-256 (or git blob id)", ErrSnapshot, f.Name)
		}
	}
	return nil
}

// Progress reports a download. Done counts bytes already present when a
// download resumes.
type Progress struct {
	// File is the file being downloaded.
	File string
	// Done and Total are bytes over all files of the snapshot.
	Done, Total int64
}

// Client downloads from the hub. The zero value uses DefaultBaseURL and
// http.DefaultClient.
type Client struct {
	// BaseURL is the hub's root; empty means DefaultBaseURL.
	BaseURL string
	// HTTP is the client to use; nil means http.DefaultClient. Its
	// redirects are followed: the hub sends large files from a CDN.
	HTTP *http.Client
	// Token, if set, is sent as a bearer token (gated or private models).
	Token string
	// UserAgent is sent with every request when set.
	UserAgent string
	// StallTimeout ends a download that receives nothing for this long,
	// keeping what arrived for the next attempt; 0 means one minute. The
	// HTTP client's own timeout should be 0: a large file takes minutes.
	StallTimeout time.Duration
}

// errStalled ends a download whose connection has gone quiet.
var errStalled = errors.New("no data received")

func (c *Client) base() string {
	if c.BaseURL == "" {
		return DefaultBaseURL
	}
	return strings.TrimRight(c.BaseURL, "/")
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

func (c *Client) request(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	return req, nil
}

// fileURL is where the hub serves a file of a repository at a revision.
func (c *Client) fileURL(s Snapshot, name string) string {
	return c.base() + "/" + s.Repo + "/resolve/" + s.Revision + "/" + escapePath(name)
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// StagingDir is where Install keeps an unfinished download of dest.
func StagingDir(dest string) string {
	return filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".partial")
}

// Install downloads the snapshot's files into dest. Files already in the
// staging folder from an interrupted call are checked and kept, or resumed
// where they stopped. progress, if not nil, is called as bytes arrive, at
// most every 100 ms and once at the end of each file.
//
// An existing dest is replaced only once the new folder is complete and
// synced; if anything fails, dest is left as it was.
func (c *Client) Install(ctx context.Context, s Snapshot, dest string, progress func(Progress)) error {
	if err := s.Validate(); err != nil {
		return err
	}
	dest = filepath.Clean(dest)
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("install %s: %w", s.Repo, err)
	}
	staging := StagingDir(dest)
	if err := prepareStaging(staging, s); err != nil {
		return fmt.Errorf("install %s: %w", s.Repo, err)
	}

	p := &progressState{fn: progress, total: s.Bytes()}
	installed := s
	installed.Files = make([]File, len(s.Files))
	for i, f := range s.Files {
		sum, err := c.download(ctx, s, f, staging, p)
		if err != nil {
			return fmt.Errorf("install %s@%s: %w", s.Repo, s.Revision, err)
		}
		installed.Files[i] = f
		installed.Files[i].SHA256 = sum
	}
	s = installed
	if err := writeManifest(staging, s); err != nil {
		return fmt.Errorf("install %s: %w", s.Repo, err)
	}
	if err := syncTree(staging); err != nil {
		return fmt.Errorf("install %s: sync: %w", s.Repo, err)
	}
	if err := replace(staging, dest); err != nil {
		return fmt.Errorf("install %s: %w", s.Repo, err)
	}
	return nil
}

// stagingSnapshot is the name of the file recording what a staging folder
// is being filled with, so that a download of another revision does not
// resume from its files.
const stagingSnapshot = ".snapshot.json"

func prepareStaging(staging string, s Snapshot) error {
	want, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if got, err := os.ReadFile(filepath.Join(staging, stagingSnapshot)); err == nil && string(got) == string(want) {
		return nil
	}
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(staging, stagingSnapshot), want, 0o644)
}

type progressState struct {
	fn    func(Progress)
	total int64
	done  int64
	file  string
	last  time.Time
}

func (p *progressState) add(n int64, force bool) {
	p.done += n
	if p.fn == nil {
		return
	}
	if now := time.Now(); force || now.Sub(p.last) >= 100*time.Millisecond {
		p.last = now
		p.fn(Progress{File: p.file, Done: p.done, Total: p.total})
	}
}

// fileHash computes both digests a file may be checked against: SHA-256,
// and git's blob id (SHA-1 of a "blob <size>" header and the contents).
type fileHash struct {
	size    int64
	s256    hash.Hash
	gitSHA1 hash.Hash
}

func newFileHash(size int64) *fileHash {
	h := &fileHash{size: size, s256: sha256.New(), gitSHA1: sha1.New()}
	h.Reset()
	return h
}

func (h *fileHash) Write(b []byte) (int, error) {
	h.s256.Write(b)
	h.gitSHA1.Write(b)
	return len(b), nil
}

func (h *fileHash) Reset() {
	h.s256.Reset()
	h.gitSHA1.Reset()
	fmt.Fprintf(h.gitSHA1, "blob %d\x00", h.size)
}

// download brings one file to staging, resuming a partial copy, and returns
// its hex SHA-256.
func (c *Client) download(ctx context.Context, s Snapshot, f File, staging string, p *progressState) (string, error) {
	target := filepath.Join(staging, filepath.FromSlash(f.Name))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return "", err
	}
	p.file = f.Name
	out, err := os.OpenFile(target, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", err
	}
	defer out.Close()

	// Hash what an earlier attempt left, then ask for the rest.
	h := newFileHash(f.Size)
	have, err := io.Copy(h, out)
	if err != nil {
		return "", fmt.Errorf("read partial %s: %w", f.Name, err)
	}
	if have > f.Size {
		if err := restart(out, h); err != nil {
			return "", err
		}
		have = 0
	}
	p.add(have, false)
	if have < f.Size {
		n, err := c.fetch(ctx, s, f, out, h, have, p)
		if err != nil {
			return "", err
		}
		have = n
	}
	sum := hex.EncodeToString(h.s256.Sum(nil))
	oid := hex.EncodeToString(h.gitSHA1.Sum(nil))
	if have != f.Size || f.SHA256 != "" && sum != f.SHA256 || f.SHA256 == "" && oid != f.GitOID {
		out.Close()
		// A bad file must not be resumed by the next attempt.
		os.Remove(target)
		if f.SHA256 == "" {
			return "", fmt.Errorf("%w: %s is %d bytes with git blob id %s, want %d bytes with %s", ErrChecksum, f.Name, have, oid, f.Size, f.GitOID)
		}
		return "", fmt.Errorf("%w: %s is %d bytes with SHA-256 %s, want %d bytes with %s", ErrChecksum, f.Name, have, sum, f.Size, f.SHA256)
	}
	p.add(0, true)
	return sum, out.Sync()
}

func restart(out *os.File, h *fileHash) error {
	if err := out.Truncate(0); err != nil {
		return err
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h.Reset()
	return nil
}

// fetch downloads f from offset have, appending to out and h, and returns
// the length out then has.
func (c *Client) fetch(ctx context.Context, s Snapshot, f File, out *os.File, h *fileHash, have int64, p *progressState) (int64, error) {
	stall := c.StallTimeout
	if stall <= 0 {
		stall = time.Minute
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(stall, func() { cancel(fmt.Errorf("%w for %v", errStalled, stall)) })
	defer timer.Stop()

	req, err := c.request(ctx, c.fileURL(s, f.Name))
	if err != nil {
		return have, err
	}
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return have, fmt.Errorf("download %s: %w", f.Name, err)
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			return have, fmt.Errorf("download %s: asked for bytes from %d, got %q", f.Name, have, resp.Header.Get("Content-Range"))
		}
	case resp.StatusCode == http.StatusOK:
		// The whole file, whether or not a range was asked for.
		if have > 0 {
			p.add(-have, false)
			if err := restart(out, h); err != nil {
				return 0, err
			}
			have = 0
		}
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return have, fmt.Errorf("%w: %s at %s (HTTP %d)", ErrNotFound, f.Name, s.Revision, resp.StatusCode)
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// The partial file is not a prefix of this one: start over on
		// the next attempt.
		return have, fmt.Errorf("%w: %s: the hub refused to resume at byte %d", ErrChecksum, f.Name, have)
	default:
		return have, fmt.Errorf("download %s: HTTP %d %s", f.Name, resp.StatusCode, http.StatusText(resp.StatusCode))
	}

	if _, err := out.Seek(have, io.SeekStart); err != nil {
		return have, err
	}
	// Read one byte more than the file should have, to notice a longer one.
	body := io.LimitReader(resp.Body, f.Size-have+1)
	buf := make([]byte, 256<<10)
	for {
		n, rerr := body.Read(buf)
		timer.Reset(stall)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				return have, err
			}
			h.Write(buf[:n])
			have += int64(n)
			p.add(int64(n), false)
		}
		if rerr == io.EOF {
			return have, nil
		}
		if rerr != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errStalled) {
				rerr = cause
			}
			return have, fmt.Errorf("download %s: %w (run again to resume at byte %d)", f.Name, rerr, have)
		}
	}
}

// rangeStart parses the first byte of a Content-Range such as
// "bytes 100-199/200".
func rangeStart(cr string) (int64, bool) {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return 0, false
	}
	start, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(start, 10, 64)
	return n, err == nil
}

func writeManifest(dir string, s Snapshot) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestName), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Remove(filepath.Join(dir, stagingSnapshot))
}

// ReadManifest returns the snapshot an installed folder was made from.
func ReadManifest(dir string) (Snapshot, error) {
	var s Snapshot
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestName), err)
	}
	return s, nil
}

// syncTree fsyncs every file and folder under dir, dir included, so that
// the rename that follows never exposes files whose data is not on disk.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}

// replace moves staging to dest. An existing dest is first moved aside and
// removed after, so that at every moment dest is either absent or complete.
func replace(staging, dest string) error {
	parent := filepath.Dir(dest)
	var old string
	if _, err := os.Lstat(dest); err == nil {
		old = filepath.Join(parent, fmt.Sprintf(".%s.old-%d", filepath.Base(dest), time.Now().UnixNano()))
		if err := os.Rename(dest, old); err != nil {
			return err
		}
	}
	if err := os.Rename(staging, dest); err != nil {
		if old != "" {
			os.Rename(old, dest)
		}
		return err
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
