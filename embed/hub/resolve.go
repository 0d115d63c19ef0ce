package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Resolve asks the hub for the files names of repo at revision (a branch,
// a tag or a commit) and returns them as a snapshot pinned to the commit
// the revision designates now, with each file's size and checksum as the
// hub's own metadata gives them: the SHA-256 of files stored with LFS, the
// git blob id of the others. It is how a model outside a catalogue is
// pinned at pull time; the manifest Install writes then holds SHA-256s for
// every file.
func (c *Client) Resolve(ctx context.Context, repo, revision string, names []string) (Snapshot, error) {
	s := Snapshot{Repo: repo}
	if !repoRE.MatchString(repo) || strings.Contains(repo, "..") {
		return s, fmt.Errorf("%w: repository %q is not owner/name", ErrSnapshot, repo)
	}
	if revision == "" {
		revision = "main"
	}
	var info struct {
		SHA string `json:"sha"`
	}
	if err := c.getJSON(ctx, c.base()+"/api/models/"+repo+"/revision/"+url.PathEscape(revision), &info); err != nil {
		return s, fmt.Errorf("resolve %s@%s: %w", repo, revision, err)
	}
	s.Revision = info.SHA
	var tree []struct {
		Type string `json:"type"`
		Path string `json:"path"`
		OID  string `json:"oid"`
		Size int64  `json:"size"`
		LFS  *struct {
			OID  string `json:"oid"`
			Size int64  `json:"size"`
		} `json:"lfs"`
	}
	if err := c.getJSON(ctx, c.base()+"/api/models/"+repo+"/tree/"+info.SHA, &tree); err != nil {
		return s, fmt.Errorf("list %s@%s: %w", repo, info.SHA, err)
	}
	byPath := map[string]File{}
	for _, e := range tree {
		if e.Type != "file" {
			continue
		}
		f := File{Name: e.Path, Size: e.Size, GitOID: e.OID}
		if e.LFS != nil {
			f = File{Name: e.Path, Size: e.LFS.Size, SHA256: e.LFS.OID}
		}
		byPath[e.Path] = f
	}
	for _, n := range names {
		f, ok := byPath[n]
		if !ok {
			return s, fmt.Errorf("%w: %s has no %s at %s", ErrNotFound, repo, n, info.SHA)
		}
		s.Files = append(s.Files, f)
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("resolve %s@%s: %w", repo, revision, err)
	}
	return s, nil
}

// getJSON decodes the JSON answer to a GET of u into v.
func (c *Client) getJSON(ctx context.Context, u string, v any) error {
	req, err := c.request(ctx, u)
	if err != nil {
		return err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w (HTTP %d)", ErrNotFound, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	// Listings of model repositories are small; 16 MB is far beyond them.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(v); err != nil {
		return fmt.Errorf("bad answer from the hub: %w", err)
	}
	return nil
}
