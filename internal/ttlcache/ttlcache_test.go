package ttlcache

import (
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New[string, int](2, time.Minute)
	c.now = func() time.Time { return now }

	c.Put("a", 1)
	c.Put("b", 2)
	if v, ok := c.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v; want 1, true", v, ok)
	}
	// "b" is now least recently used and goes first.
	c.Put("c", 3)
	if _, ok := c.Get("b"); ok {
		t.Fatal("b survived past the size bound")
	}
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	now = now.Add(time.Minute)
	if _, ok := c.Get("a"); ok {
		t.Fatal("a survived its TTL")
	}
	c.Put("c", 4)
	if v, _ := c.Get("c"); v != 4 {
		t.Fatalf("Put did not replace: got %d", v)
	}
}

func TestZeroTTLStoresNothing(t *testing.T) {
	c := New[string, int](10, 0)
	c.Put("a", 1)
	if _, ok := c.Get("a"); ok || c.Len() != 0 {
		t.Fatal("a cache with TTL 0 stored a value")
	}
}
