//go:build !linux

package closedport

import "net"

// Elsewhere the port is picked free and released at once, and Listen binds
// it again: the port is refused only as long as no other socket takes it,
// so run the tests one package at a time there.
type releasedHolder struct{}

func reserve() (string, holder, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", nil, err
	}
	return addr, releasedHolder{}, nil
}

func (releasedHolder) listen(addr string) (net.Listener, error) { return net.Listen("tcp4", addr) }

func (releasedHolder) Close() error { return nil }
