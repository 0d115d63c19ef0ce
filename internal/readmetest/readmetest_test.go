package readmetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records whether the check failed.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Helper()               {}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	const before = "# Title\n\n<!-- table:begin -->\n| old |\n<!-- table:end -->\n\nAfter.\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, section, want string
		update, fails       bool
		after               string
	}{
		{"stale", "table", "| new |\n", false, true, before},
		{"updated", "table", "| new |\n", true, false, "# Title\n\n<!-- table:begin -->\n| new |\n<!-- table:end -->\n\nAfter.\n"},
		{"in step", "table", "| new |\n", false, false, "# Title\n\n<!-- table:begin -->\n| new |\n<!-- table:end -->\n\nAfter.\n"},
		{"no markers", "tools", "x\n", true, true, "# Title\n\n<!-- table:begin -->\n| new |\n<!-- table:end -->\n\nAfter.\n"},
	}
	for _, tt := range tests {
		r := &recorder{TB: t}
		Check(r, path, tt.section, tt.want, tt.update, "go test -update")
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if r.failed != tt.fails || string(got) != tt.after {
			t.Errorf("%s: failed %v, README %q; want failed %v, README %q", tt.name, r.failed, got, tt.fails, tt.after)
		}
	}
}

// writerEnv names the README and section a writer process rewrites; see
// TestWriterProcess.
const writerEnv = "READMETEST_WRITER"

// TestConcurrentWriters runs two processes at once, as
// `go test ./server ./config -run README -update` does, each rewriting its
// own section of one README 2,000 times and checking before each rewrite
// that its previous one is still there: no process may lose the other's
// section, read a half-written file or drop the text around the sections.
func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	const before = "# Title\n\n<!-- a:begin -->\n<!-- a:end -->\n\nBetween.\n\n<!-- b:begin -->\n<!-- b:end -->\n\nAfter.\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	for _, section := range []string{"a", "b"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), writerEnv+"="+path+"|"+section)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("writer %s:\n%s", section, out.String())
			}
		})
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("a writer failed: %v", err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\n<!-- a:begin -->\n| a 1999 |\n<!-- a:end -->\n\nBetween.\n\n<!-- b:begin -->\n| b 1999 |\n<!-- b:end -->\n\nAfter.\n"
	if string(got) != want {
		t.Errorf("README after both writers:\n%s\nwant:\n%s", got, want)
	}
}

// TestWriterProcess is one writer of TestConcurrentWriters, run in a
// process of its own.
func TestWriterProcess(t *testing.T) {
	spec := os.Getenv(writerEnv)
	if spec == "" {
		t.Skip("run by TestConcurrentWriters")
	}
	path, section, _ := strings.Cut(spec, "|")
	// Both writers start together: each says it is ready, then waits for
	// the other.
	if err := os.WriteFile(path+".ready."+section, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		_, errA := os.Stat(path + ".ready.a")
		_, errB := os.Stat(path + ".ready.b")
		if errA == nil && errB == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the other writer did not start")
		}
	}
	for i := range 2000 {
		if i > 0 {
			if err := check(path, section, fmt.Sprintf("| %s %d |\n", section, i-1), false, ""); err != nil {
				t.Fatalf("write %d: my previous write is lost: %v", i, err)
			}
		}
		if err := check(path, section, fmt.Sprintf("| %s %d |\n", section, i), true, ""); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
}
