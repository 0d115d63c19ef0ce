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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"query":"x","api_key":"k","nested":{"Password":"p","list":[{"token":"t","ok":1}]}}`,
			`{"api_key":"[REDACTED]","nested":{"Password":"[REDACTED]","list":[{"ok":1,"token":"[REDACTED]"}]},"query":"x"}`},
		{`{"query":"tokens are words"}`, `{"query":"tokens are words"}`},
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
// the writer what a database restart is.
type proxy struct {
	t      *testing.T
	target string
	ln     net.Listener
	addr   string
	mu     sync.Mutex
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	p.start("127.0.0.1:0")
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
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
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restart() { p.start(p.addr) }

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
