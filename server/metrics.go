package server

import (
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpsearch/mcpsearch/docs"
)

// metrics are the Prometheus series of one Server, on a registry of its
// own so that tests and several servers in one process do not collide.
type metrics struct {
	reg         *prometheus.Registry
	calls       *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	// rateLimitFallbacks counts calls the shared rate limit store did not
	// decide (MCP_rate_limit_on_db_failure did).
	rateLimitFallbacks *prometheus.CounterVec
	cache              *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpsearch_tool_calls_total", Help: "Tool calls by tool and outcome (ok or an error code).",
		}, []string{"tool", "outcome", "transport"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "mcpsearch_tool_call_duration_seconds", Help: "Time from receiving a tool call to its result.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tool"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpsearch_rate_limited_total", Help: "Tool calls rejected by the tool's token bucket.",
		}, []string{"tool"}),
		rateLimitFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpsearch_rate_limit_fallbacks_total",
			Help: "Tool calls whose shared rate limit the database did not decide (it failed or was slow): MCP_rate_limit_on_db_failure decided them.",
		}, []string{"tool"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpsearch_web_search_cache_total", Help: "web_search cache lookups by result (hit or miss).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.rateLimited, m.rateLimitFallbacks, m.cache,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe records one finished tool call.
func (m *metrics) observe(tool, transport, outcome string, took time.Duration) {
	m.calls.WithLabelValues(tool, outcome, transport).Inc()
	m.latency.WithLabelValues(tool).Observe(took.Seconds())
	if outcome == CodeRateLimited {
		m.rateLimited.WithLabelValues(tool).Inc()
	}
}

// Register adds collectors of other parts (database pool, audit queue,
// ingestion) to the server's registry.
func (s *Server) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})
}

// registerDeps exports the state of the audit queue, the database pool and
// document ingestion.
func (s *Server) registerDeps() {
	if w := s.deps.Audit; w != nil {
		s.metrics.reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mcpsearch_audit_queue_depth", Help: "Audit rows waiting to be written."},
				func() float64 { return float64(w.Stats().Queued) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_audit_dropped_total", Help: "Audit rows dropped because the queue was full."},
				func() float64 { return float64(w.Stats().Dropped) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_audit_written_total", Help: "Audit rows stored in the database."},
				func() float64 { return float64(w.Stats().Written) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_audit_retries_total", Help: "Failed audit batch writes, each retried."},
				func() float64 { return float64(w.Stats().Retries) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_audit_refused_total", Help: "Audit rows the database refused on their own, logged and not stored."},
				func() float64 { return float64(w.Stats().Poisoned) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_audit_sanitised_total", Help: "Audit rows whose values were changed to be storable (NUL, invalid UTF-8, oversized)."},
				func() float64 { return float64(w.Stats().Sanitised) }),
		)
	}
	if il, ok := s.deps.Search.(instanceLister); ok {
		s.metrics.reg.MustRegister(instanceCollector{il})
	}
	if in := s.deps.Ingest; in != nil {
		s.metrics.reg.MustRegister(ingestCollector{in})
	}
}

// PoolMetrics are the series of a database connection pool, for Register,
// labelled pool=name: the server's pools are "main" (documents and audit)
// and "rate_limits" (the shared token buckets).
func PoolMetrics(pool *pgxpool.Pool, name string) []prometheus.Collector {
	labels := prometheus.Labels{"pool": name}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	return []prometheus.Collector{
		gauge("mcpsearch_db_pool_total_conns", "Connections in the database pool.", func() float64 { return float64(pool.Stat().TotalConns()) }),
		gauge("mcpsearch_db_pool_idle_conns", "Idle connections in the database pool.", func() float64 { return float64(pool.Stat().IdleConns()) }),
		gauge("mcpsearch_db_pool_acquired_conns", "Connections in use.", func() float64 { return float64(pool.Stat().AcquiredConns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_db_pool_acquire_total", Help: "Connections acquired from the pool.", ConstLabels: labels},
			func() float64 { return float64(pool.Stat().AcquireCount()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mcpsearch_db_pool_acquire_wait_seconds_total", Help: "Time spent waiting for a connection.", ConstLabels: labels},
			func() float64 { return pool.Stat().AcquireDuration().Seconds() }),
	}
}

// ingestCollector exports the document store's processing counters. One
// collector reads IngestStats once per scrape, so the series agree.
type ingestCollector struct{ in Uploads }

var (
	ingestFilesDesc = prometheus.NewDesc("mcpsearch_ingest_files_total",
		"Uploaded files processed by this process, by outcome (ready or failed).", []string{"status"}, nil)
	ingestChunksDesc = prometheus.NewDesc("mcpsearch_ingest_chunks_total",
		"Chunks stored from files that became ready.", nil, nil)
	ingestEmbeddedDesc = prometheus.NewDesc("mcpsearch_ingest_embedded_texts_total",
		"Chunks of uploaded files sent to the embedder (a re-sync that finds nothing changed sends none).", nil, nil)
	ingestPagesDesc = prometheus.NewDesc("mcpsearch_ingest_pages_total",
		"PDF pages of files that became ready.", nil, nil)
	ingestBytesDesc = prometheus.NewDesc("mcpsearch_ingest_bytes_total",
		"Bytes of files that became ready.", nil, nil)
	ingestSecondsDesc = prometheus.NewDesc("mcpsearch_ingest_processing_seconds_total",
		"Time spent extracting, chunking, embedding and storing files.", nil, nil)
	ingestQueuedDesc = prometheus.NewDesc("mcpsearch_ingest_queue_depth",
		"Uploaded files waiting for a worker.", nil, nil)
	ingestBatchesDesc = prometheus.NewDesc("mcpsearch_ingest_batches_total",
		"Transactions that stored processed files; files ready at the same moment share one.", nil, nil)
	indexBuildsDesc = prometheus.NewDesc("mcpsearch_vector_index_builds_total",
		"Vector index builds this process ran in the background.", nil, nil)
	indexSecondsDesc = prometheus.NewDesc("mcpsearch_vector_index_build_seconds_total",
		"Time this process spent building the vector index.", nil, nil)
)

func (ingestCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ingestFilesDesc, ingestChunksDesc, ingestEmbeddedDesc, ingestPagesDesc, ingestBytesDesc, ingestSecondsDesc, ingestQueuedDesc,
		ingestBatchesDesc, indexBuildsDesc, indexSecondsDesc} {
		ch <- d
	}
}

func (c ingestCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.in.IngestStats()
	ch <- prometheus.MustNewConstMetric(ingestFilesDesc, prometheus.CounterValue, float64(st.Ready), docs.StatusReady)
	ch <- prometheus.MustNewConstMetric(ingestFilesDesc, prometheus.CounterValue, float64(st.Failed), docs.StatusFailed)
	ch <- prometheus.MustNewConstMetric(ingestChunksDesc, prometheus.CounterValue, float64(st.Chunks))
	ch <- prometheus.MustNewConstMetric(ingestEmbeddedDesc, prometheus.CounterValue, float64(st.Embedded))
	ch <- prometheus.MustNewConstMetric(ingestPagesDesc, prometheus.CounterValue, float64(st.Pages))
	ch <- prometheus.MustNewConstMetric(ingestBytesDesc, prometheus.CounterValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(ingestSecondsDesc, prometheus.CounterValue, st.Duration.Seconds())
	ch <- prometheus.MustNewConstMetric(ingestQueuedDesc, prometheus.GaugeValue, float64(st.Queued))
	ch <- prometheus.MustNewConstMetric(ingestBatchesDesc, prometheus.CounterValue, float64(st.Batches))
	ch <- prometheus.MustNewConstMetric(indexBuildsDesc, prometheus.CounterValue, float64(st.IndexBuilds))
	ch <- prometheus.MustNewConstMetric(indexSecondsDesc, prometheus.CounterValue, st.IndexBuildDuration.Seconds())
}

// instanceCollector exports each SearXNG instance's state, read once per
// scrape.
type instanceCollector struct{ il instanceLister }

var (
	instanceUpDesc = prometheus.NewDesc("mcpsearch_searxng_instance_healthy",
		"1 while searches use the SearXNG instance, 0 while it is skipped after failures.", []string{"instance"}, nil)
	instanceSearchesDesc = prometheus.NewDesc("mcpsearch_searxng_instance_searches_total",
		"Searches sent to the SearXNG instance, by outcome.", []string{"instance", "outcome"}, nil)
)

func (instanceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- instanceUpDesc
	ch <- instanceSearchesDesc
}

func (c instanceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, in := range c.il.Instances() {
		up := 0.0
		if in.Healthy {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(instanceUpDesc, prometheus.GaugeValue, up, in.URL)
		ch <- prometheus.MustNewConstMetric(instanceSearchesDesc, prometheus.CounterValue, float64(in.Successes), in.URL, "ok")
		ch <- prometheus.MustNewConstMetric(instanceSearchesDesc, prometheus.CounterValue, float64(in.Failures), in.URL, "error")
	}
}
