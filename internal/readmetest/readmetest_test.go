package readmetest

import (
	"os"
	"path/filepath"
	"testing"
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
