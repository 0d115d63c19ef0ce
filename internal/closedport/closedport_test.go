package closedport

import (
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// dial connects to addr and reports the error, closing the connection.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

func TestRefusesAndHoldsThePort(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the port is held on Linux only")
	}
	p := Reserve(t)
	if err := dial(p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s = %v, want connection refused", p.Addr(), err)
	}
	// A server binding the port, with SO_REUSEADDR as every Go listener,
	// cannot take it; a bind to port 0 is refused the port by the same
	// rule, so the kernel never picks it.
	if l, err := net.Listen("tcp", p.Addr()); err == nil {
		l.Close()
		t.Fatalf("another listener took %s", p.Addr())
	}
	if l, err := net.Listen("tcp", "0.0.0.0:"+port(t, p)); err == nil {
		l.Close()
		t.Fatalf("a listener on every address took port %s", port(t, p))
	}
}

func TestListenThenRefuseAgain(t *testing.T) {
	p := Reserve(t)
	for round := range 2 {
		l, err := p.Listen()
		if err != nil {
			t.Fatalf("round %d: Listen: %v", round, err)
		}
		if l.Addr().String() != p.Addr() {
			t.Fatalf("listening on %s, want %s", l.Addr(), p.Addr())
		}
		served := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				_, err = c.Write([]byte("up"))
				c.Close()
			}
			served <- err
		}()
		c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			t.Fatalf("round %d: dial while listening: %v", round, err)
		}
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != "up" {
			t.Fatalf("round %d: read %q, %v", round, b, err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		l.Close()
		if runtime.GOOS == "linux" {
			if err := dial(p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("round %d: dial after the listener closed = %v, want connection refused", round, err)
			}
		}
	}
}

func TestClose(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if l, err := p.Listen(); !errors.Is(err, net.ErrClosed) {
		if l != nil {
			l.Close()
		}
		t.Errorf("Listen after Close = %v, want net.ErrClosed", err)
	}
}

func port(t *testing.T, p *Port) string {
	t.Helper()
	_, port, err := net.SplitHostPort(p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return port
}
