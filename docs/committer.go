package docs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The committer stores processed files, grouping those that are ready at
// the same moment into one transaction (a group commit): files come one by
// one from the workers and from Ingest callers, and while one batch is
// being written the next gathers, so a stream of small files is stored in
// batches with no added wait, and a lone file is stored at once.

// Bounds of one batch: files, chunks and extracted text.
const (
	batchFiles  = 256
	batchChunks = 4096
	batchText   = 32 << 20
	// queuedChunks bounds the chunks waiting to be stored, holding back
	// the producers: processed files in memory are bounded.
	queuedChunks = 4 * batchChunks
	// commitTimeout bounds one batch's transaction. It does not end with
	// the caller's context: a file processed is stored even as its caller
	// gives up, or the Ingester shuts down.
	commitTimeout = 2 * time.Minute
	// outagePatience is how long work done waits for the database to be
	// reachable again (a restart) before it is given up, to be resumed;
	// outageRetry is the first wait between two tries, doubled up to
	// maxOutageRetry.
	outagePatience = 10 * time.Second
	outageRetry    = 100 * time.Millisecond
	maxOutageRetry = time.Second
)

type commitJob struct {
	item *commitItem
	done func(*commitItem)
}

type committer struct {
	st  *Store
	log *slog.Logger
	// batches counts the transactions that stored a batch.
	batches *atomic.Int64

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []commitJob
	chunks  int
	closed  bool
	stopped chan struct{}
}

func newCommitter(st *Store, log *slog.Logger, batches *atomic.Int64) *committer {
	c := &committer{st: st, log: log, batches: batches, stopped: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.run()
	return c
}

// submit queues an item, waiting while too many chunks wait already; done
// is called once the item is settled. It fails with ErrClosed after close.
func (c *committer) submit(it *commitItem, done func(*commitItem)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for !c.closed && c.chunks >= queuedChunks {
		c.cond.Wait()
	}
	if c.closed {
		return ErrClosed
	}
	c.queue = append(c.queue, commitJob{it, done})
	c.chunks += len(it.chunks)
	c.cond.Broadcast()
	return nil
}

// commit submits an item and waits until it is settled.
func (c *committer) commit(it *commitItem) error {
	settled := make(chan struct{})
	if err := c.submit(it, func(*commitItem) { close(settled) }); err != nil {
		return err
	}
	<-settled
	return nil
}

// close stores what is queued and stops; submit fails after it.
func (c *committer) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	<-c.stopped
}

func (c *committer) run() {
	defer close(c.stopped)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.cond.Wait()
		}
		if len(c.queue) == 0 {
			c.mu.Unlock()
			return
		}
		n, chunks, text := 0, 0, 0
		for n < len(c.queue) && n < batchFiles {
			it := c.queue[n].item
			if n > 0 && (chunks+len(it.chunks) > batchChunks || text+it.textBytes() > batchText) {
				break
			}
			chunks += len(it.chunks)
			text += it.textBytes()
			n++
		}
		jobs := make([]commitJob, n)
		copy(jobs, c.queue)
		c.queue = c.queue[n:]
		c.chunks -= chunks
		c.cond.Broadcast()
		c.mu.Unlock()

		items := make([]*commitItem, n)
		for i, j := range jobs {
			items[i] = j.item
		}
		c.store(items)
		for _, j := range jobs {
			j.done(j.item)
		}
	}
}

func (it *commitItem) textBytes() int {
	if it.doc == nil {
		return 0
	}
	return len(it.doc.Text)
}

// store commits items as one batch. Should the batch fail for another
// reason than the database being unavailable, each item is committed alone,
// so that one file the database refuses does not fail the others; a failed
// file whose reason is refused is stored with the generic reason.
func (c *committer) store(items []*commitItem) {
	err := c.once(items)
	if err == nil {
		return
	}
	if len(items) == 1 || errors.Is(err, ErrUnavailable) {
		for _, it := range items {
			it.err = err
		}
		if len(items) == 1 && !errors.Is(err, ErrUnavailable) && items[0].failed && items[0].reason != genericFailure {
			c.log.Warn("docs: a failure reason could not be stored; storing the generic one", "error", err)
			items[0].reason, items[0].err = genericFailure, nil
			c.store(items)
		}
		return
	}
	c.log.Warn("docs: a batch of files could not be stored together; storing them one by one", "files", len(items), "error", err)
	for _, it := range items {
		it.dupOf, it.err = nil, nil
		c.store([]*commitItem{it})
	}
}

// once runs commitBatch, trying again once when the transaction lost a
// deadlock or serialisation race, and for up to outagePatience while the
// database cannot be reached (a restart): files processed during an outage
// are stored when it ends rather than processed again. Their claims fence
// the write, so a file another process took over meanwhile is not stored
// twice.
func (c *committer) once(items []*commitItem) error {
	var err error
	raced := false
	wait := outageRetry
	deadline := time.Now().Add(outagePatience)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		err = c.st.commitBatch(ctx, items)
		cancel()
		switch {
		case err == nil:
			c.batches.Add(1)
			return nil
		case errors.Is(err, ErrUnavailable):
			if time.Now().Add(wait).After(deadline) {
				return err
			}
			time.Sleep(wait)
			wait = min(2*wait, maxOutageRetry)
		case Retryable(err) && !raced:
			raced = true
		default:
			return err
		}
	}
}
