//go:build unix

package readmetest

import (
	"os"
	"syscall"
)

// lock waits for an exclusive lock on f, which lasts until f is closed.
func lock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}
