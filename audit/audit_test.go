package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"query":"x","api_key":"k","nested":{"Password":"p","list":[{"token":"t","ok":1}]}}`,
			`{"api_key":"[REDACTED]","nested":{"Password":"[REDACTED]","list":[{"ok":1,"token":"[REDACTED]"}]},"query":"x"}`},
		{`{"query":"tokens are words"}`, `{"query":"tokens are words"}`},
		{`{"url":"https://wiki.example/","crawl":{"max_pages":5,"headers":{"Cookie":"sid=s3cret","X-Team":"docs"}}}`,
			`{"crawl":{"headers":{"Cookie":"[REDACTED]","X-Team":"[REDACTED]"},"max_pages":5},"url":"https://wiki.example/"}`},
		{`{"headers":["Cookie: sid=s3cret"]}`, `{"headers":"[REDACTED]"}`},
		{`not json`, `{"unparsed":"not json"}`},
		{``, ``},
	}
	for _, tt := range tests {
		if got := string(Redact(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("Redact(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	small := json.RawMessage(`{"a":1}`)
	if got := Truncate(small, 100); !bytes.Equal(got, small) {
		t.Errorf("small result changed: %s", got)
	}
	big := json.RawMessage(`{"text":"` + strings.Repeat("é", 100) + `"}`)
	got := Truncate(big, 50)
	var v struct {
		Truncated bool   `json:"truncated"`
		Bytes     int    `json:"bytes"`
		Preview   string `json:"preview"`
	}
	if err := json.Unmarshal(got, &v); err != nil || !v.Truncated || v.Bytes != len(big) || len(v.Preview) > 50 {
		t.Errorf("Truncate gave %s (%v)", got, err)
	}
}

func TestLogModeWithoutDatabase(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(nil, Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	w.Record(Entry{ToolName: "web_search", Arguments: json.RawMessage(`{"password":"p"}`)})
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "tool=web_search") || strings.Contains(buf.String(), `"p"`) || w.Stats().Logged != 1 || w.Mode() != "log" {
		t.Errorf("log mode wrote %q, stats %+v", buf.String(), w.Stats())
	}
}

// proxy forwards TCP to Postgres and can be cut and restored, which is to
// the writer what a database restart is. Its port is held for the test:
// cut, it refuses connections, and no other server can take it meanwhile.
type proxy struct {
	t      *testing.T
	target string
	port   *closedport.Port
	ln     net.Listener
	addr   string
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	port := closedport.Reserve(t)
	p := &proxy{t: t, target: target, port: port, addr: port.Addr()}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	ln, err := p.port.Listen()
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln {
				// Accepted just before stop closed the listener.
				p.mu.Unlock()
				c.Close()
				u.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
}

// stop refuses new connections and breaks the open ones.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restart() { p.start() }

// poolVia opens a pool to dbURL through the proxy.
func poolVia(t *testing.T, dbURL, addr string) *pgxpool.Pool {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_mcp_tool_calls`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func record(w *Writer, n int, tool string) {
	for i := 0; i < n; i++ {
		w.Record(Entry{ToolName: tool, ConversationID: "c", Arguments: json.RawMessage(`{"query":"q"}`), LatencyMS: i})
	}
}

func TestWriterStoresEveryRow(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	direct := poolVia(t, dbURL, hostOf(t, dbURL))
	w := NewWriter(direct, Options{BatchSize: 100, FlushInterval: 10 * time.Millisecond})
	record(w, 1234, "web_search")
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, direct); n != 1234 {
		t.Fatalf("%d rows stored, want 1234", n)
	}
	if st := w.Stats(); st.Written != 1234 || st.Dropped != 0 || st.Queued != 0 {
		t.Errorf("stats %+v", st)
	}
	entries, err := Tail(context.Background(), direct, 5)
	if err != nil || len(entries) != 5 || entries[0].ToolName != "web_search" {
		t.Fatalf("Tail: %v %+v", err, entries)
	}
	if _, err := Prune(context.Background(), direct, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := count(t, direct); n != 1234 {
		t.Errorf("Prune removed fresh rows: %d left", n)
	}
	if _, err := direct.Exec(context.Background(), `UPDATE chat_mcp_tool_calls SET created_at = now() - interval '40 days' WHERE latency_ms < 100`); err != nil {
		t.Fatal(err)
	}
	if n, err := Prune(context.Background(), direct, 30*24*time.Hour); err != nil || n != 100 {
		t.Errorf("Prune = %d, %v; want 100", n, err)
	}
}

// TestWriterSurvivesDatabaseOutage cuts the database off mid-run: rows are
// kept and retried, and after it is back every row is stored exactly once.
func TestWriterSurvivesDatabaseOutage(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	direct := poolVia(t, dbURL, hostOf(t, dbURL))
	px := newProxy(t, hostOf(t, dbURL))
	w := NewWriter(poolVia(t, dbURL, px.addr), Options{BatchSize: 50, FlushInterval: 10 * time.Millisecond})
	record(w, 100, "before")
	waitFor(t, func() bool { return w.Stats().Written == 100 })
	px.stop()
	record(w, 100, "during")
	waitFor(t, func() bool { return w.Stats().Retries > 0 })
	if st := w.Stats(); st.Queued != 100 || st.LastErr == "" {
		t.Errorf("during the outage: %+v, want 100 queued and an error", st)
	}
	px.restart()
	record(w, 100, "after")
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(t, direct); n != 300 {
		t.Fatalf("%d rows stored, want 300", n)
	}
}

func TestQueueOverflowIsCounted(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	px := newProxy(t, hostOf(t, dbURL))
	px.stop()
	var logs bytes.Buffer
	w := NewWriter(poolVia(t, dbURL, px.addr), Options{QueueSize: 10, FlushInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	record(w, 15, "x")
	if st := w.Stats(); st.Dropped != 5 || st.Queued != 10 {
		t.Errorf("stats %+v, want 5 dropped and 10 queued", st)
	}
	if !strings.Contains(logs.String(), "dropped") {
		t.Errorf("the drop was not logged: %s", logs.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// The database never comes back: Close gives up and logs every row.
	if err := w.Close(ctx); err == nil || strings.Count(logs.String(), "audit row not stored") != 10 {
		t.Errorf("Close = %v; logged %d unstored rows, want 10", err, strings.Count(logs.String(), "audit row not stored"))
	}
}

func hostOf(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostileValuesAreStored records, between good rows, one row per kind
// of value PostgreSQL refuses as sent. Every row must be stored, the hostile
// one naming the column that was changed, and no row may be set aside.
func TestHostileValuesAreStored(t *testing.T) {
	huge := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB, too long for a btree index entry
	tests := []struct {
		name   string
		entry  Entry
		column string
	}{
		{"NUL in conversation_id", Entry{ConversationID: "a\x00b"}, "conversation_id"},
		{"NUL in tool_name", Entry{ToolName: "list\x00files"}, "tool_name"},
		{"NUL in error", Entry{Error: "bad\x00"}, "error"},
		{"NUL in error_code", Entry{ErrorCode: "TOOL\x00ERROR"}, "error_code"},
		{"NUL in transport", Entry{Transport: "stdio\x00"}, "transport"},
		{"NUL in session_id", Entry{SessionID: "\x00"}, "session_id"},
		{"NUL in client_name", Entry{ClientName: "c\x00"}, "client_name"},
		{"NUL in client_version", Entry{ClientVersion: "1\x00"}, "client_version"},
		{"NUL in api_key_name", Entry{APIKey: "k\x00"}, "api_key_name"},
		{"NUL in subject", Entry{Subject: "s\x00"}, "subject"},
		{"invalid UTF-8 in conversation_id", Entry{ConversationID: "caf\xe9"}, "conversation_id"},
		{"invalid UTF-8 in error", Entry{Error: "\xc3\x28"}, "error"},
		{"NUL escape in arguments", Entry{Arguments: json.RawMessage(`{"conversation_id":"a\u0000b","query":"q"}`)}, "arguments"},
		{"NUL escape in an argument key", Entry{Arguments: json.RawMessage(`{"q\u0000":1}`)}, "arguments"},
		{"lone surrogate in arguments", Entry{Arguments: json.RawMessage(`{"query":"\udc00"}`)}, "arguments"},
		{"invalid UTF-8 in arguments", Entry{Arguments: json.RawMessage("{\"query\":\"\xff\"}")}, "arguments"},
		{"arguments that are not JSON", Entry{Arguments: json.RawMessage("x\x00\xff")}, "arguments"},
		{"NUL escape in result", Entry{Result: json.RawMessage(`{"text":"\u0000"}`)}, "result"},
		{"number beyond numeric in result", Entry{Result: json.RawMessage(`{"n":1e999999}`)}, "result"},
		{"huge conversation_id", Entry{ConversationID: huge}, "conversation_id"},
		{"huge tool_name", Entry{ToolName: huge}, "tool_name"},
		{"huge error", Entry{Error: huge}, "error"},
		{"huge session_id", Entry{SessionID: huge}, "session_id"},
		{"latency beyond integer", Entry{LatencyMS: 1 << 40}, "latency_ms"},
	}
	dbURL := pgtest.NewDatabase(t)
	pool := poolVia(t, dbURL, hostOf(t, dbURL))
	// One batch holds every row, so a refused value would hold up all.
	w := NewWriter(pool, Options{BatchSize: 1000, FlushInterval: time.Hour})
	ids := make([]uuid.UUID, len(tests))
	for i, tt := range tests {
		record(w, 2, "good")
		e := tt.entry
		if e.ToolName == "" {
			e.ToolName = "list_files"
		}
		e.ID = uuid.New()
		ids[i] = e.ID
		w.Record(e)
	}
	record(w, 2, "good")
	closeWithin(t, w)
	want := 3*len(tests) + 2
	if n := count(t, pool); n != want {
		t.Fatalf("%d rows stored, want %d; stats %+v", n, want, w.Stats())
	}
	if st := w.Stats(); st.Poisoned != 0 || st.Sanitised != uint64(len(tests)) {
		t.Errorf("stats %+v: want no row set aside and %d sanitised", st, len(tests))
	}
	for i, tt := range tests {
		var sanitised []string
		err := pool.QueryRow(context.Background(), `SELECT sanitised FROM chat_mcp_tool_calls WHERE id = $1`, ids[i]).Scan(&sanitised)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(sanitised) != 1 || sanitised[0] != tt.column {
			t.Errorf("%s: sanitised = %v, want [%s]", tt.name, sanitised, tt.column)
		}
	}
	var clean int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_mcp_tool_calls WHERE tool_name = 'good' AND sanitised IS NULL`).Scan(&clean); err != nil || clean != 2*len(tests)+2 {
		t.Errorf("%d good rows stored unmarked (%v), want %d", clean, err, 2*len(tests)+2)
	}
}

// TestRefusedRowIsIsolated makes the database refuse one row of a batch for
// a reason the writer cannot repair: that row is logged and counted, every
// other row is stored, and later rows are not held up.
func TestRefusedRowIsIsolated(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	pool := poolVia(t, dbURL, hostOf(t, dbURL))
	if _, err := pool.Exec(context.Background(), `ALTER TABLE chat_mcp_tool_calls ADD CONSTRAINT refuse_poison CHECK (tool_name <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	w := NewWriter(pool, Options{BatchSize: 100, FlushInterval: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	record(w, 30, "before")
	w.Record(Entry{ToolName: "poison", ConversationID: "c"})
	record(w, 30, "after")
	waitFor(t, func() bool { st := w.Stats(); return st.Written+st.Poisoned == 61 })
	record(w, 10, "later")
	closeWithin(t, w)
	if n := count(t, pool); n != 70 {
		t.Fatalf("%d rows stored, want 70", n)
	}
	st := w.Stats()
	if st.Poisoned != 1 || st.Written != 70 || st.Retries != 0 {
		t.Errorf("stats %+v, want 1 poisoned, 70 written, no retry", st)
	}
	if !strings.Contains(logs.String(), "audit row refused") || !strings.Contains(logs.String(), "refuse_poison") {
		t.Errorf("the refused row was not logged with its error: %s", logs.String())
	}
}

// TestStatusReportsStall checks that a writer whose writes keep failing
// while rows wait says so, and recovers when the database is back.
func TestStatusReportsStall(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	px := newProxy(t, hostOf(t, dbURL))
	w := NewWriter(poolVia(t, dbURL, px.addr), Options{FlushInterval: 10 * time.Millisecond, StallAfter: 200 * time.Millisecond})
	record(w, 5, "x")
	waitFor(t, func() bool { return w.Stats().Written == 5 })
	if st := w.Status(); st.Stalled || st.LastWrite.IsZero() || !st.FailingSince.IsZero() || st.Mode != "database" {
		t.Errorf("healthy writer: %+v", st)
	}
	px.stop()
	record(w, 5, "y")
	waitFor(t, func() bool { return w.Status().Stalled })
	if st := w.Status(); st.Queued != 5 || st.LastErr == "" || st.FailingSince.IsZero() {
		t.Errorf("stalled writer: %+v", st)
	}
	px.restart()
	waitFor(t, func() bool { st := w.Status(); return !st.Stalled && st.Queued == 0 })
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the writer's goroutine and the
// test's to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnrepairedRowsAreIsolated queues rows the way Record would not let
// them through, holding values the database or the driver refuses, to show
// that the writer's last line of defence sets aside exactly those rows.
func TestUnrepairedRowsAreIsolated(t *testing.T) {
	dbURL := pgtest.NewDatabase(t)
	pool := poolVia(t, dbURL, hostOf(t, dbURL))
	var logs syncBuffer
	w := NewWriter(pool, Options{BatchSize: 100, FlushInterval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	bad := []Entry{
		{ToolName: "x", ConversationID: "a\x00b"},
		{ToolName: "x", Arguments: json.RawMessage(`{"q":"\u0000"}`)},
		{ToolName: "x", Error: "\xff"},
		{ToolName: "x", LatencyMS: 1 << 40}, // the driver cannot encode it as integer
	}
	w.mu.Lock()
	for i, e := range bad {
		for j := 0; j < 5; j++ {
			w.queue = append(w.queue, Entry{ID: uuid.New(), ToolName: "good", LatencyMS: i*10 + j, CreatedAt: time.Now()})
		}
		e.ID, e.CreatedAt = uuid.New(), time.Now()
		w.queue = append(w.queue, e)
	}
	w.mu.Unlock()
	closeWithin(t, w)
	if n := count(t, pool); n != 5*len(bad) {
		t.Errorf("%d rows stored, want %d", n, 5*len(bad))
	}
	if st := w.Stats(); st.Poisoned != uint64(len(bad)) || st.Written != uint64(5*len(bad)) {
		t.Errorf("stats %+v, want %d poisoned", st, len(bad))
	}
	if n := strings.Count(logs.String(), "audit row refused"); n != len(bad) {
		t.Errorf("%d refused rows logged, want %d: %s", n, len(bad), logs.String())
	}
}

// closeWithin closes w, failing the test if queued rows are not stored
// within a generous bound instead of hanging it.
func closeWithin(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
