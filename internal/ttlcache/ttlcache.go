// Package ttlcache is a small bounded in-memory cache whose entries expire.
// It exists so that an agent repeating a web search does not trip the
// search engine's limiter; it is not a general-purpose cache.
package ttlcache

import (
	"container/list"
	"sync"
	"time"
)

// Cache maps keys to values for at most TTL each, holding at most Size
// entries; the least recently used entry goes first when it is full.
// It is safe for concurrent use. A Cache with TTL 0 stores nothing.
type Cache[K comparable, V any] struct {
	ttl  time.Duration
	size int
	now  func() time.Time

	mu    sync.Mutex
	order *list.List // front = most recently used; values are *entry[K, V]
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	key     K
	value   V
	expires time.Time
}

// New returns a cache of at most size entries that live for ttl.
func New[K comparable, V any](size int, ttl time.Duration) *Cache[K, V] {
	if size < 1 {
		size = 1
	}
	return &Cache[K, V]{ttl: ttl, size: size, now: time.Now, order: list.New(), items: map[K]*list.Element{}}
}

// Get returns the value stored under key if it has not expired.
func (c *Cache[K, V]) Get(key K) (V, bool) {
	var zero V
	if c.ttl <= 0 {
		return zero, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*entry[K, V])
	if !c.now().Before(e.expires) {
		c.order.Remove(el)
		delete(c.items, key)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.value, true
}

// Put stores value under key for the cache's TTL.
func (c *Cache[K, V]) Put(key K, value V) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	expires := c.now().Add(c.ttl)
	if el, ok := c.items[key]; ok {
		e := el.Value.(*entry[K, V])
		e.value, e.expires = value, expires
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&entry[K, V]{key: key, value: value, expires: expires})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*entry[K, V]).key)
	}
}

// Len returns the number of entries held, expired ones included until they
// are next looked up or pushed out.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
