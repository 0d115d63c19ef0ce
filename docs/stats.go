package docs

import (
	"sync/atomic"
	"time"
)

// IngestStats counts the files an Ingester has processed since it started, for
// monitoring. Duplicates, which are not processed again, are not counted.
type IngestStats struct {
	// Queued is the number of queue slots in use: uploads reserved, and
	// files submitted to this Ingester that no worker has started yet.
	Queued int
	// Working is the number of files this Ingester's workers hold now.
	Working int
	// Ready and Failed count processed files by outcome.
	Ready, Failed int64
	// Embedded counts the texts (chunks) this Ingester sent to the
	// embedder: a re-sync that finds nothing changed sends none.
	Embedded int64
	// Chunks, Pages and Bytes are the totals of the ready files.
	Chunks, Pages, Bytes int64
	// Duration is the time spent processing files, ready or failed.
	Duration time.Duration
	// Batches counts the transactions that stored processed files:
	// files ready to be stored at the same moment share one.
	Batches int64
	// IndexBuilds counts the vector index builds this Ingester ran in the
	// background, and IndexBuildDuration their total time.
	IndexBuilds        int64
	IndexBuildDuration time.Duration
}

// ingestCounters are the atomics behind IngestStats.
type ingestCounters struct {
	ready, failed, chunks, pages, bytes, nanos atomic.Int64
	batches, working, embedded                 atomic.Int64
	indexBuilds, indexNanos                    atomic.Int64
}

func (c *ingestCounters) done(f File, ok bool, took time.Duration) {
	c.nanos.Add(int64(took))
	if !ok {
		c.failed.Add(1)
		return
	}
	c.ready.Add(1)
	c.chunks.Add(int64(f.ChunkCount))
	c.pages.Add(int64(f.PageCount))
	c.bytes.Add(f.SizeBytes)
}

// IngestStats returns the processing counters of this Ingester.
func (in *Ingester) IngestStats() IngestStats {
	c := &in.counters
	return IngestStats{
		Queued:   len(in.slots),
		Working:  int(c.working.Load()),
		Embedded: c.embedded.Load(),
		Ready:    c.ready.Load(),
		Failed:   c.failed.Load(),
		Chunks:   c.chunks.Load(),
		Pages:    c.pages.Load(),
		Bytes:    c.bytes.Load(),
		Duration: time.Duration(c.nanos.Load()),
		Batches:  c.batches.Load(),

		IndexBuilds:        c.indexBuilds.Load(),
		IndexBuildDuration: time.Duration(c.indexNanos.Load()),
	}
}
