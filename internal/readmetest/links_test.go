package readmetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinks checks every relative link and anchor of the README and of the
// pages under doc/, so that a section moved from one page to another
// cannot leave a link behind it pointing nowhere.
func TestLinks(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "doc", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "..", "README.md")}, files...)
	if len(files) < 2 {
		t.Fatalf("no pages under doc/: %v", files)
	}
	CheckLinks(t, files...)
}

func TestSlug(t *testing.T) {
	for text, want := range map[string]string{
		"Documents: upload, search, quote":       "documents-upload-search-quote",
		"Python / LangChain":                     "python--langchain",
		"Reading web pages: fetch_url":           "reading-web-pages-fetch_url",
		"`search_docs` with a semantic embedder": "search_docs-with-a-semantic-embedder",
		"Use it from Claude Desktop (stdio)":     "use-it-from-claude-desktop-stdio",
		"Scaling out: Citus 12.1":                "scaling-out-citus-121",
	} {
		if got := Slug(text); got != want {
			t.Errorf("Slug(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestCheckLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	page := write("doc/page.md", "# Page\n\n## Shared limits\n\n## Shared limits\n\n```sh\n# not a heading\n[in code](missing.md)\n```\n\nSee [top](../README.md#intro).\n")
	readme := write("README.md", "# Intro\n\n"+strings.Join([]string{
		"[ok](doc/page.md)",
		"[ok](doc/page.md#shared-limits-1)",
		"[ok](#intro)",
		"[ok](doc/)",
		"[ok](https://example.com/nowhere.md#x)",
		"`[in a code span](nowhere.md)`",
		"[ok](doc/page.md \"a title\")",
		"[ref]: doc/page.md#page",
		"[missing file](doc/gone.md)",
		"[missing anchor](doc/page.md#shared-limits-2)",
		"[heading in code](doc/page.md#not-a-heading)",
		"[own missing](#outro)",
		"[ref]: doc/page.md#nowhere",
	}, "\n")+"\n")
	errs := checkLinks([]string{readme, page})
	var got []string
	for _, err := range errs {
		got = append(got, err.Error())
	}
	want := []string{"doc/gone.md", "#shared-limits-2", "#not-a-heading", "#outro", "#nowhere"}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("error %d = %q, want one naming %s", i, got[i], w)
		}
	}
}
