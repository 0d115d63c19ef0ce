//go:build linux

package closedport

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A socket bound with SO_REUSEPORT and without SO_REUSEADDR holds the port
// against every socket that does not set SO_REUSEPORT, which is every
// server the tests start and every port the kernel picks for a bind to
// port 0; a listener that sets SO_REUSEPORT, from the same user, may bind
// it beside the holder. The holder never listens, so once no listener is
// left a connection is refused.
type reuseportHolder struct{ fd int }

func reserve() (string, holder, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", nil, err
	}
	if err := setReusePort(fd); err != nil {
		syscall.Close(fd)
		return "", nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return "", nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return "", nil, err
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return "", nil, errors.New("the bound socket has no IPv4 address")
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port)), &reuseportHolder{fd: fd}, nil
}

func (h *reuseportHolder) listen(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = setReusePort(int(fd)) }); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp4", addr)
}

func (h *reuseportHolder) Close() error { return syscall.Close(h.fd) }

func setReusePort(fd int) error {
	return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
}
