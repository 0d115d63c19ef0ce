// Package readmetest keeps the sections of the README that are generated
// from the code (the tool reference, the table of settings) in step with
// what generates them.
package readmetest

import (
	"os"
	"strings"
	"testing"
)

// Check compares the section of the README at path between the markers
// <!-- name:begin --> and <!-- name:end --> with want, and fails t when
// they differ, saying to run regenerate; with update it rewrites the
// section instead.
func Check(t testing.TB, path, name, want string, update bool, regenerate string) {
	t.Helper()
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("%v", err)
		return
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Errorf("%s lacks the %q ... %q markers", path, begin, end)
		return
	}
	if got := s[i+len(begin) : j]; got == want {
		return
	}
	if !update {
		t.Errorf("the %s section of %s is stale; run %s\nwant:\n%s", name, path, regenerate, want)
		return
	}
	s = s[:i+len(begin)] + want + s[j:]
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Errorf("%v", err)
	}
}
