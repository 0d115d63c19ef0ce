// Package audit records every tool call in the chat_mcp_tool_calls table.
// Writes are asynchronous and batched so that a slow database never slows
// a call; rows wait in a bounded queue while the database is down and are
// retried; nothing is dropped without being counted and logged. It knows
// Postgres, not MCP.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
	CreatedAt      time.Time
}

// Options tune a Writer. Zero values take the defaults.
type Options struct {
	QueueSize      int           // rows held while waiting or while the database is down (default 10000)
	BatchSize      int           // rows per COPY (default 500)
	FlushInterval  time.Duration // longest a row waits before its batch is written (default 1s)
	MaxResultBytes int           // stored result size; larger results are truncated (default 16 KiB)
	ServerID       *uuid.UUID    // fills server_id of every row
	Logger         *slog.Logger
}

// Stats counts what a Writer has done.
type Stats struct {
	Queued  int    // rows waiting now
	Written uint64 // rows stored
	Dropped uint64 // rows lost because the queue was full
	Logged  uint64 // rows written to the log because there is no database
	Retries uint64 // failed batch writes, each retried
	LastErr string // the last write error, cleared by a success
}

// Writer batches entries into the database, or into the log when it has
// no database.
type Writer struct {
	pool *pgxpool.Pool
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	queue   []Entry
	stats   Stats
	closing bool
	wake    chan struct{}
	done    chan struct{}
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

// Record queues e without blocking. It redacts secret-looking arguments
// and truncates a large result first.
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
	e.Arguments = Redact(e.Arguments)
	e.Result = Truncate(e.Result, w.opts.MaxResultBytes)
	if w.pool == nil {
		w.mu.Lock()
		w.stats.Logged++
		w.mu.Unlock()
		w.log.Info("audit", "id", e.ID, "tool", e.ToolName, "conversation", e.ConversationID, "error_code", e.ErrorCode,
			"error", e.Error, "latency_ms", e.LatencyMS, "transport", e.Transport, "session", e.SessionID,
			"client", e.ClientName, "api_key", e.APIKey, "arguments", string(e.Arguments))
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
func (w *Writer) flushOne() error {
	w.mu.Lock()
	batch := w.queue[:min(len(w.queue), w.opts.BatchSize)]
	batch = append([]Entry(nil), batch...)
	w.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS audit_stage (LIKE chat_mcp_tool_calls INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
			return err
		}
		rows := make([][]any, len(batch))
		for i, e := range batch {
			rows[i] = []any{e.ID, e.ServerID, nullable(e.ConversationID), e.ToolName, jsonb(e.Arguments), jsonb(e.Result),
				nullable(e.Error), nullable(e.ErrorCode), e.LatencyMS, nullable(e.Transport), nullable(e.SessionID),
				nullable(e.ClientName), nullable(e.ClientVersion), nullable(e.APIKey), e.CreatedAt}
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit_stage"}, columns, pgx.CopyFromRows(rows)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO chat_mcp_tool_calls SELECT * FROM audit_stage ON CONFLICT (id) DO NOTHING`)
		return err
	})
	if err != nil {
		return fmt.Errorf("write %d audit rows: %w", len(batch), err)
	}
	w.mu.Lock()
	// Close may have taken the queue meanwhile.
	if len(w.queue) >= len(batch) {
		w.queue = w.queue[len(batch):]
	}
	w.stats.Written += uint64(len(batch))
	if w.stats.LastErr != "" {
		w.log.Info("audit writes resumed", "queued", len(w.queue))
	}
	w.stats.LastErr = ""
	w.mu.Unlock()
	return nil
}

// columns are chat_mcp_tool_calls' columns in table order, which the
// staged INSERT ... SELECT * relies on.
var columns = []string{"id", "server_id", "conversation_id", "tool_name", "arguments", "result", "error", "error_code",
	"latency_ms", "transport", "session_id", "client_name", "client_version", "api_key_name", "created_at"}

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
// depth. Input that is not JSON is returned as a JSON string marked so.
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
			if secretKey.MatchString(k) {
				t[k] = "[REDACTED]"
			} else {
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
