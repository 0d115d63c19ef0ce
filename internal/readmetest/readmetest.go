// Package readmetest keeps the sections of the README that are generated
// from the code (the tool reference, the table of settings) in step with
// what generates them.
package readmetest

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// Check compares the section of the README at path between the markers
// <!-- name:begin --> and <!-- name:end --> with want, and fails t when
// they differ, saying to run regenerate; with update it rewrites the
// section instead.
//
// Each check holds a lock on the README while it reads and rewrites it,
// and rewrites only its own section, so that test binaries run at once
// (go test ./server ./config -run README -update) each keep the other's
// section: one waits while the other reads and writes.
func Check(t testing.TB, path, name, want string, update bool, regenerate string) {
	t.Helper()
	if err := check(path, name, want, update, regenerate); err != nil {
		t.Errorf("%v", err)
	}
}

func check(path, name, want string, update bool, regenerate string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lock(f); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	// Closing the file releases the lock.
	readme, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	s := string(readme)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the %q ... %q markers", path, begin, end)
	}
	if got := s[i+len(begin) : j]; got == want {
		return nil
	}
	if !update {
		return fmt.Errorf("the %s section of %s is stale; run %s\nwant:\n%s", name, path, regenerate, want)
	}
	// Rewritten in place, under the lock, so that the lock stays on the
	// file every check opens.
	s = s[:i+len(begin)] + want + s[j:]
	if _, err := f.WriteAt([]byte(s), 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(s)))
}
