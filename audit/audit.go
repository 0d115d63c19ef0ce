// Package audit records every tool call in the chat_mcp_tool_calls table.
// Writes are asynchronous and batched so that a slow database never slows
// a call; rows wait in a bounded queue while the database is down and are
// retried; nothing is dropped without being counted and logged. Values are
// made storable before a row is queued, and a row the database still
// refuses is set aside on its own, so that one hostile call never holds up
// the rows of others. It knows Postgres, not MCP.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// Entry is one tool call.
type Entry struct {
	ID             uuid.UUID
	ServerID       *uuid.UUID
	ConversationID string
	ToolName       string
	Arguments      json.RawMessage
	Result         json.RawMessage
	Error          string
	ErrorCode      string
	LatencyMS      int
	Transport      string
	SessionID      string
	ClientName     string
	ClientVersion  string
	APIKey         string
	// Subject is the sub claim of the OAuth access token the call came
	// with; "" for an API key or none.
	Subject string
	// JobID is the ingestion job the call started or touched (package
	// jobs); "" for none.
	JobID     string
	CreatedAt time.Time
	// Sanitised names the columns whose values Record changed to make the
	// row storable (NUL or invalid UTF-8 replaced, over-long text cut, a
	// number out of range), in table order; empty for most rows.
	Sanitised []string
	// Trace is the span of the call, which the span of the write that
	// stores the row links to; it is not stored.
	Trace trace.SpanContext
}

// Options tune a Writer. Zero values take the defaults.
type Options struct {
	QueueSize      int           // rows held while waiting or while the database is down (default 10000)
	BatchSize      int           // rows per COPY (default 500)
	FlushInterval  time.Duration // longest a row waits before its batch is written (default 1s)
	MaxResultBytes int           // stored result size; larger results are truncated (default 16 KiB)
	MaxArgsBytes   int           // stored arguments size; larger arguments are truncated (default 64 KiB)
	StallAfter     time.Duration // failing this long with rows queued makes Status report Stalled (default 30s)
	ServerID       *uuid.UUID    // fills server_id of every row
	Logger         *slog.Logger
	// Tracer traces the writes of batches holding sampled calls, each a
	// trace of its own linked to those calls; nil traces nothing.
	Tracer trace.TracerProvider
}

// Stats counts what a Writer has done.
type Stats struct {
	Queued    int    // rows waiting now
	Written   uint64 // rows stored
	Dropped   uint64 // rows lost because the queue was full
	Poisoned  uint64 // rows the database refused on their own, logged and not stored
	Sanitised uint64 // rows whose values were changed to be storable
	Logged    uint64 // rows written to the log because there is no database
	Retries   uint64 // failed batch writes, each retried
	LastErr   string // the last write error, cleared by a success
}

// Status is a Writer's health, for readiness checks and metrics.
type Status struct {
	Stats
	// Mode is "database" or "log".
	Mode string
	// LastWrite is when rows were last stored; zero before the first write.
	LastWrite time.Time
	// FailingSince is when the current run of failed writes began; zero
	// while writes succeed.
	FailingSince time.Time
	// Stalled is true when rows are queued and every write has failed for
	// longer than Options.StallAfter: the audit is not being stored.
	Stalled bool
}

// Writer batches entries into the database, or into the log when it has
// no database.
type Writer struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	mu           sync.Mutex
	queue        []Entry
	stats        Stats
	lastWrite    time.Time
	failingSince time.Time
	closing      bool
	wake         chan struct{}
	done         chan struct{}
}

// NewWriter starts a writer. With a nil pool every entry goes to the log.
func NewWriter(pool *pgxpool.Pool, opts Options) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 10000
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = 16 << 10
	}
	if opts.MaxArgsBytes <= 0 {
		opts.MaxArgsBytes = 64 << 10
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{pool: pool, opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), done: make(chan struct{})}
	if pool != nil {
		go w.run()
	} else {
		close(w.done)
	}
	return w
}

// Record queues e without blocking. It redacts secret-looking arguments,
// truncates large arguments and results, and makes every value storable
// first, naming the columns it changed in e.Sanitised.
func (w *Writer) Record(e Entry) {
	if e.ID == uuid.Nil {
		e.ID = uuid.New()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	if e.ServerID == nil {
		e.ServerID = w.opts.ServerID
	}
	e = sanitise(e, w.opts.MaxArgsBytes, w.opts.MaxResultBytes)
	if len(e.Sanitised) > 0 {
		w.mu.Lock()
		w.stats.Sanitised++
		w.mu.Unlock()
	}
	if w.pool == nil {
		w.mu.Lock()
		w.stats.Logged++
		w.mu.Unlock()
		w.log.Info("audit", "id", e.ID, "tool", e.ToolName, "conversation", e.ConversationID, "error_code", e.ErrorCode,
			"error", e.Error, "latency_ms", e.LatencyMS, "transport", e.Transport, "session", e.SessionID,
			"client", e.ClientName, "api_key", e.APIKey, "subject", e.Subject, "job", e.JobID, "arguments", string(e.Arguments), "sanitised", e.Sanitised)
		return
	}
	w.mu.Lock()
	if len(w.queue) >= w.opts.QueueSize {
		w.stats.Dropped++
		dropped := w.stats.Dropped
		w.mu.Unlock()
		// Log the first drop and then every thousandth, so an outage does
		// not flood the log but the count is always visible.
		if dropped == 1 || dropped%1000 == 0 {
			w.log.Error("audit queue full: rows dropped", "dropped_total", dropped, "queue_size", w.opts.QueueSize)
		}
		return
	}
	w.queue = append(w.queue, e)
	full := len(w.queue) >= w.opts.BatchSize
	w.mu.Unlock()
	if full {
		w.signal()
	}
}

func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Stats returns the writer's counters.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Queued = len(w.queue)
	return s
}

// Status returns the writer's counters and health.
func (w *Writer) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Status{Stats: w.stats, Mode: w.Mode(), LastWrite: w.lastWrite, FailingSince: w.failingSince}
	st.Queued = len(w.queue)
	st.Stalled = st.Queued > 0 && !st.FailingSince.IsZero() && time.Since(st.FailingSince) >= w.opts.StallAfter
	return st
}

// Mode is "database" or "log".
func (w *Writer) Mode() string {
	if w.pool == nil {
		return "log"
	}
	return "database"
}

// Close writes what is queued, waiting until ctx is done at the most. Rows
// that could not be stored by then are written to the log, so none is lost
// silently.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.signal()
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	w.mu.Lock()
	left := w.queue
	w.queue = nil
	w.mu.Unlock()
	for _, e := range left {
		w.log.Error("audit row not stored", "id", e.ID, "tool", e.ToolName, "conversation", e.ConversationID,
			"error_code", e.ErrorCode, "created_at", e.CreatedAt, "arguments", string(e.Arguments))
	}
	if len(left) > 0 {
		return fmt.Errorf("audit: %d rows could not be stored before shutdown; they are in the log", len(left))
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.opts.FlushInterval)
	defer tick.Stop()
	var backoff time.Duration
	for {
		select {
		case <-w.wake:
		case <-tick.C:
		}
		// Write batches until the queue is empty; on failure wait and retry.
		for {
			w.mu.Lock()
			closing, n := w.closing, len(w.queue)
			w.mu.Unlock()
			if n == 0 {
				if closing {
					return
				}
				break
			}
			if err := w.flushOne(); err != nil {
				backoff = min(max(backoff*2, 100*time.Millisecond), 5*time.Second)
				w.mu.Lock()
				w.stats.Retries++
				first := w.stats.LastErr == ""
				w.stats.LastErr = err.Error()
				if w.failingSince.IsZero() {
					w.failingSince = time.Now()
				}
				w.mu.Unlock()
				if first {
					w.log.Warn("audit write failed; rows stay queued and are retried", "error", err, "queued", n)
				}
				time.Sleep(backoff)
				continue
			}
			backoff = 0
		}
	}
}

// flushOne writes the oldest batch. Rows stay queued until the write has
// committed; a batch retried after an unknown outcome cannot be stored
// twice because ids are primary keys and the insert skips conflicts.
//
// When the database refuses the batch for its data, the rows are written
// one by one instead, so that only a row it still refuses is set aside
// (logged and counted as poisoned) and every other row is stored. Any other
// failure, such as an outage, leaves the rows queued for the caller to retry.
func (w *Writer) flushOne() (err error) {
	w.mu.Lock()
	batch := w.queue[:min(len(w.queue), w.opts.BatchSize)]
	batch = append([]Entry(nil), batch...)
	w.mu.Unlock()

	ctx, span := w.startWrite(batch)
	defer func() {
		if err != nil {
			telemetry.Fail(span, "write_failed")
		}
		span.End()
	}()
	err = w.writeBatch(ctx, batch)
	if err == nil {
		w.settle(len(batch), len(batch), 0)
		return nil
	}
	if !w.refused(err) {
		return fmt.Errorf("write %d audit rows: %w", len(batch), err)
	}
	written, poisoned := 0, 0
	for i, e := range batch {
		err := w.writeRow(ctx, e)
		switch {
		case err == nil:
			written++
		case w.refused(err):
			poisoned++
			w.log.Error("audit row refused; it is not stored", "id", e.ID, "tool", e.ToolName,
				"conversation", e.ConversationID, "created_at", e.CreatedAt, "error", err)
		default:
			w.settle(i, written, poisoned)
			return fmt.Errorf("write audit row %s: %w", e.ID, err)
		}
	}
	w.settle(len(batch), written, poisoned)
	return nil
}

// settle removes the first n rows of the queue, which have been dealt with:
// written of them stored and poisoned refused.
func (w *Writer) settle(n, written, poisoned int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Close may have taken the queue meanwhile.
	if len(w.queue) >= n {
		w.queue = w.queue[n:]
	}
	w.stats.Written += uint64(written)
	w.stats.Poisoned += uint64(poisoned)
	if n == 0 {
		return
	}
	w.lastWrite = time.Now()
	w.failingSince = time.Time{}
	if w.stats.LastErr != "" {
		w.log.Info("audit writes resumed", "queued", len(w.queue))
	}
	w.stats.LastErr = ""
}

// startWrite starts the span of the write of batch when one of its calls
// was sampled: a trace of its own, linked to those calls.
func (w *Writer) startWrite(batch []Entry) (context.Context, trace.Span) {
	ctx := context.Background()
	if w.opts.Tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	var links []trace.Link
	for _, e := range batch {
		if e.Trace.IsSampled() {
			links = append(links, trace.Link{SpanContext: e.Trace})
		}
	}
	if len(links) == 0 {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx, span := telemetry.StartRoot(ctx, w.opts.Tracer, "audit write", trace.SpanKindInternal, links...)
	span.SetAttributes(telemetry.RowsKey.Int(len(batch)))
	return ctx, span
}

// writeBatch stores batch with one COPY into a staging table and one
// INSERT, which skips ids already stored.
func (w *Writer) writeBatch(ctx context.Context, batch []Entry) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS audit_stage (LIKE chat_mcp_tool_calls INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
			return err
		}
		rows := make([][]any, len(batch))
		for i, e := range batch {
			rows[i] = values(e)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit_stage"}, columns, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO chat_mcp_tool_calls (`+columnList+`) SELECT `+columnList+` FROM audit_stage ON CONFLICT (id) DO NOTHING`)
		return err
	})
}

// writeRow stores one row on its own.
func (w *Writer) writeRow(ctx context.Context, e Entry) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := w.pool.Exec(ctx, `INSERT INTO chat_mcp_tool_calls (`+columnList+`) VALUES (`+placeholders+`) ON CONFLICT (id) DO NOTHING`, values(e)...)
	return err
}

// refused reports whether a write failed because of the values it carried,
// which writing the same rows again cannot fix, as opposed to an outage,
// which waiting can. The database refuses values with a data exception
// (class 22), an integrity violation (23) or a program limit such as an
// index row too large (54). An error that is not the database's own, such
// as a value the driver cannot encode, is the values' fault when the
// database still answers; a timeout or any other database error (a missing
// column, a shutdown) is not.
func (w *Writer) refused(err error) bool {
	var pgErr *pgconn.PgError
	// The driver ends a COPY whose values it cannot encode by cancelling
	// it; the database reports that as query_canceled with this message.
	copyFail := errors.As(err, &pgErr) && pgErr.Code == "57014" && strings.HasPrefix(pgErr.Message, "COPY from stdin failed")
	if pgErr != nil && !copyFail {
		switch pgErr.Code[:min(2, len(pgErr.Code))] {
		case "22", "23", "54":
			return true
		}
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || pgconn.Timeout(err) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return w.pool.Ping(ctx) == nil
}

// columns are the chat_mcp_tool_calls columns the writer fills, in the
// order of values.
var columns = []string{"id", "server_id", "conversation_id", "tool_name", "arguments", "result", "error", "error_code",
	"latency_ms", "transport", "session_id", "client_name", "client_version", "api_key_name", "created_at", "sanitised", "job_id", "subject"}

var (
	columnList   = strings.Join(columns, ", ")
	placeholders = func() string {
		p := make([]string, len(columns))
		for i := range p {
			p[i] = fmt.Sprintf("$%d", i+1)
		}
		return strings.Join(p, ", ")
	}()
)

// values is e as a row of columns.
func values(e Entry) []any {
	var sanitised []string
	if len(e.Sanitised) > 0 {
		sanitised = e.Sanitised
	}
	return []any{e.ID, e.ServerID, nullable(e.ConversationID), e.ToolName, jsonb(e.Arguments), jsonb(e.Result),
		nullable(e.Error), nullable(e.ErrorCode), e.LatencyMS, nullable(e.Transport), nullable(e.SessionID),
		nullable(e.ClientName), nullable(e.ClientVersion), nullable(e.APIKey), e.CreatedAt, sanitised, nullable(e.JobID), nullable(e.Subject)}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func jsonb(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

var secretKey = regexp.MustCompile(`(?i)(api[_-]?key|token|password|passwd|secret|authorization|credential)`)

// Redact replaces the values of object keys that look like secrets, at any
// depth, and the values of every "headers" object (request headers a crawl
// sends, such as Cookie), whose names alone are kept. Input that is not
// JSON is returned as a JSON string marked so.
func Redact(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		b, _ := json.Marshal(map[string]string{"unparsed": string(args)})
		return b
	}
	b, err := json.Marshal(redact(v))
	if err != nil {
		return nil
	}
	return b
}

func redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			switch {
			case secretKey.MatchString(k):
				t[k] = "[REDACTED]"
			case strings.EqualFold(k, "headers"):
				t[k] = redactAll(x)
			default:
				t[k] = redact(x)
			}
		}
	case []any:
		for i, x := range t {
			t[i] = redact(x)
		}
	}
	return v
}

// redactAll replaces every value of an object, keeping its keys, and any
// other value whole.
func redactAll(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return "[REDACTED]"
	}
	for k := range m {
		m[k] = "[REDACTED]"
	}
	return m
}

// Truncate keeps results up to max bytes; a larger one is replaced by a
// valid JSON object holding its size and a prefix of its text.
func Truncate(result json.RawMessage, max int) json.RawMessage {
	if len(result) <= max {
		return result
	}
	preview := []rune(string(result[:max]))
	if len(preview) > 0 {
		preview = preview[:len(preview)-1] // the cut may have split a rune
	}
	b, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(result), "preview": string(preview)})
	return b
}

// ErrNoDatabase is returned by the queries when the server has no database.
var ErrNoDatabase = errors.New("audit: no database configured (set DATABASE_URL)")
