package keyword

import (
	"container/list"
	"log/slog"
	"sync"
)

// DefaultCacheBytes is the default memory budget of a Cache: about 700,000
// chunks of 1,000 characters once merged.
const DefaultCacheBytes = 256 << 20

// Cache holds indexes by key (a conversation id), the least recently used
// first out once their memory passes the budget. An index larger than the
// whole budget is not kept: it serves the search that built it. The cache
// also runs the merges of the indexes it holds, one at a time, in the
// background.
type Cache struct {
	budget int64
	log    *slog.Logger
	// merges runs one merge at a time; pending counts those started and
	// not done.
	merges  sync.Mutex
	pending sync.WaitGroup

	mu      sync.Mutex
	used    int64
	lru     *list.List // of *entry, most recent at the front
	entries map[string]*list.Element
}

type entry struct {
	key   string
	ix    *Index
	bytes int64
}

// NewCache returns a cache of budget bytes (DefaultCacheBytes when zero or
// less) that logs merge failures to log (nil discards them).
func NewCache(budget int64, log *slog.Logger) *Cache {
	if budget <= 0 {
		budget = DefaultCacheBytes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cache{budget: budget, log: log, lru: list.New(), entries: map[string]*list.Element{}}
}

// Get returns the index cached under key, or nil.
func (c *Cache) Get(key string) *Index {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*entry).ix
	}
	return nil
}

// Put caches ix under key, or records its new size if it is cached there
// already, replacing whatever other index key held, and evicts the least
// recently used indexes beyond the budget. It reports whether ix is cached;
// an index over the whole budget is not. A cached index whose segments are
// due a merge gets one in the background.
func (c *Cache) Put(key string, ix *Index) bool {
	size := ix.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		old := e.Value.(*entry)
		c.used -= old.bytes
		if old.ix != ix {
			old.ix = ix
		}
		old.bytes = size
		c.used += size
		c.lru.MoveToFront(e)
	} else {
		if size > c.budget {
			return false
		}
		c.entries[key] = c.lru.PushFront(&entry{key: key, ix: ix, bytes: size})
		c.used += size
	}
	c.evict()
	e, cached := c.entries[key]
	if cached && e.Value.(*entry).ix == ix && ix.MergeDue() {
		c.pending.Go(func() { c.merge(key, ix) })
	}
	return cached
}

// merge merges ix's segments and takes the memory saved off the account.
func (c *Cache) merge(key string, ix *Index) {
	c.merges.Lock()
	defer c.merges.Unlock()
	if _, err := ix.Merge(); err != nil {
		c.log.Error("keyword postings malformed; searches may miss chunks of the conversation", "conversation_id", key, "error", err)
		// Searches still read the segments as they are.
		return
	}
	c.resize(key, ix)
}

// resize records the current size of ix if it is cached under key.
func (c *Cache) resize(key string, ix *Index) {
	size := ix.Bytes()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || e.Value.(*entry).ix != ix {
		return
	}
	en := e.Value.(*entry)
	c.used += size - en.bytes
	en.bytes = size
	c.evict()
}

// evict drops the least recently used indexes until the cache is within
// its budget. The caller holds c.mu.
func (c *Cache) evict() {
	for c.used > c.budget && c.lru.Len() > 0 {
		last := c.lru.Back()
		en := last.Value.(*entry)
		c.lru.Remove(last)
		delete(c.entries, en.key)
		c.used -= en.bytes
	}
}

// Drop forgets the index cached under key, if it is ix (any index when ix
// is nil).
func (c *Cache) Drop(key string, ix *Index) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok && (ix == nil || e.Value.(*entry).ix == ix) {
		c.lru.Remove(e)
		delete(c.entries, key)
		c.used -= e.Value.(*entry).bytes
	}
}

// UsedBytes returns the estimated memory of the cached indexes.
func (c *Cache) UsedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Wait waits for the merges started so far.
func (c *Cache) Wait() { c.pending.Wait() }
