package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the module root, where the Makefile and the deployment files
// live.
var repoRoot = filepath.Join("..", "..")

// TestInstall checks the two install paths the README gives: `make install`
// puts an executable binary in $(PREFIX)/bin, rebuilding it only when it is
// missing or stale, and `make uninstall` removes it; `go install
// ./cmd/mcpsearch` builds a binary that runs.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	t.Run("make", func(t *testing.T) {
		if _, err := exec.LookPath("make"); err != nil {
			t.Skip("make is not installed")
		}
		dir := t.TempDir()
		prefix := filepath.Join(dir, "prefix")
		// BIN points the build into the temporary folder, so the test
		// leaves nothing in the work tree.
		vars := []string{"PREFIX=" + prefix, "BIN=" + filepath.Join(dir, "build", "mcpsearch"), "VERSION=v0.0.0-installtest"}
		runIn(t, repoRoot, nil, "make", append([]string{"install"}, vars...)...)
		// With the binary up to date, install only copies it: `sudo make
		// install` after `make build` needs no Go toolchain as root.
		if plan := runIn(t, repoRoot, nil, "make", append([]string{"-n", "install"}, vars...)...); strings.Contains(plan, "go build") {
			t.Errorf("make install rebuilds an up-to-date binary:\n%s", plan)
		}
		bin := filepath.Join(prefix, "bin", "mcpsearch")
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatalf("make install: %v", err)
		}
		if mode := fi.Mode().Perm(); mode != 0o755 {
			t.Errorf("installed binary has mode %v, want 0755", mode)
		}
		if out := runIn(t, dir, nil, bin, "version"); strings.TrimSpace(out) != "mcpsearch v0.0.0-installtest" {
			t.Errorf("installed binary: version printed %q", out)
		}
		runIn(t, repoRoot, nil, "make", append([]string{"uninstall"}, vars...)...)
		if _, err := os.Stat(bin); !os.IsNotExist(err) {
			t.Errorf("make uninstall left %s (stat: %v)", bin, err)
		}
	})
	t.Run("go", func(t *testing.T) {
		gobin := t.TempDir()
		// With make install's settings (static, trimmed paths), so the
		// build cache it and the Dockerfile's build filled serves this one:
		// what is tested is the command, not a third compilation of every
		// dependency.
		runIn(t, repoRoot, []string{"GOBIN=" + gobin, "CGO_ENABLED=0", "GOFLAGS=-trimpath"}, "go", "install", "./cmd/mcpsearch")
		out := runIn(t, gobin, nil, filepath.Join(gobin, "mcpsearch"), "version")
		if v, ok := strings.CutPrefix(strings.TrimSpace(out), "mcpsearch "); !ok || v == "" {
			t.Errorf("go install: version printed %q, want \"mcpsearch VERSION\"", out)
		}
	})
}

// runIn runs name with args in dir, with extra added to the test's
// environment, and returns its standard output; it fails the test when
// the command fails.
func runIn(t *testing.T, dir string, extra []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extra...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
