// Package closedport gives tests the address of a server that is down: a
// loopback TCP port that refuses every connection and that no other socket
// can take while the test holds it.
//
// Picking a free port by listening on 127.0.0.1:0 and closing the listener
// does not give that: every server the tests start binds 127.0.0.1:0 too,
// packages run in parallel, and the kernel hands the released port to the
// next one, so a "down" SearXNG or PostgreSQL answers as another test's
// server. A Port keeps its socket bound, without listening, for as long as
// it is open: the kernel answers a connection with a reset (connection
// refused) and gives the port to no one else. Listen serves it for a while,
// as a database that comes back does, and closing that listener makes it
// refuse again without letting the port go.
package closedport

import (
	"net"
	"sync"
	"testing"
)

// Port is a loopback TCP port held closed. Its methods are safe to call
// from several goroutines.
type Port struct {
	addr string

	mu     sync.Mutex
	hold   holder
	closed bool
}

// New reserves a loopback port that refuses connections until Close.
func New() (*Port, error) {
	addr, h, err := reserve()
	if err != nil {
		return nil, err
	}
	return &Port{addr: addr, hold: h}, nil
}

// Reserve is New for a test: it holds the port until the test ends and
// ends the test if no port can be had.
func Reserve(t testing.TB) *Port {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatalf("reserve a closed port: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// Addr returns the port's address, "127.0.0.1:<port>".
func (p *Port) Addr() string { return p.addr }

// Listen starts accepting connections on the port. Closing the listener
// makes the port refuse connections again; the port stays held. Listen
// after Close fails.
func (p *Port) Listen() (net.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, net.ErrClosed
	}
	return p.hold.listen(p.addr)
}

// Close releases the port. Listeners opened by Listen stay open.
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.hold.Close()
}

// holder keeps a port reserved and opens listeners on it.
type holder interface {
	listen(addr string) (net.Listener, error)
	Close() error
}
