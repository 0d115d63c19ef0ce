package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

func TestQueryFiltersAndPages(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := NewWriter(pool, Options{FlushInterval: 10 * time.Millisecond})
	// 30 calls: tools alternate, every third failed, keys and
	// conversations in turn.
	for i := range 30 {
		e := Entry{ToolName: []string{"search_docs", "web_search"}[i%2], APIKey: []string{"alpha", "beta", "gamma"}[i%3],
			ConversationID: []string{"c1", "c2", ""}[i%3], Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), LatencyMS: i, JobID: fmt.Sprint("job-", i)}
		if i%3 == 0 {
			e.Error, e.ErrorCode = "too many", "RATE_LIMITED"
		}
		w.Record(e)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Spread them over 30 minutes, the 30th the newest.
	if _, err := pool.Exec(ctx, `UPDATE chat_mcp_tool_calls SET created_at = now() - make_interval(mins => 30 - latency_ms)`); err != nil {
		t.Fatal(err)
	}

	all := func(f Filter) []int {
		t.Helper()
		var got []int
		for {
			p, err := w.Query(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Entries {
				got = append(got, e.LatencyMS)
			}
			if p.Next == "" {
				return got
			}
			f.Cursor = p.Next
		}
	}
	count := func(f Filter) int { return len(all(f)) }

	if got := all(Filter{Limit: 7}); len(got) != 30 || got[0] != 29 || got[29] != 0 {
		t.Fatalf("every call, 7 a page, newest first: %v", got)
	}
	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{"tool", Filter{Tool: "search_docs"}, 15},
		{"key", Filter{APIKey: "beta"}, 10},
		{"failed", Filter{Outcome: OutcomeError}, 10},
		{"succeeded", Filter{Outcome: OutcomeOK}, 20},
		{"a code", Filter{Outcome: "RATE_LIMITED"}, 10},
		{"another code", Filter{Outcome: "TIMEOUT"}, 0},
		{"conversation", Filter{Conversation: "c2"}, 10},
		{"since", Filter{Since: time.Now().Add(-10*time.Minute - 30*time.Second)}, 10},
		{"until", Filter{Until: time.Now().Add(-20*time.Minute + 30*time.Second)}, 11},
		{"together", Filter{Tool: "web_search", Outcome: OutcomeOK, Limit: 2}, 10},
		// A key limited to c1 sees c1's calls and its own (gamma's are
		// those without a conversation).
		{"visible", Filter{Visible: []string{"c1"}, VisibleKey: "gamma"}, 20},
		{"visible, none", Filter{Visible: []string{}, VisibleKey: "nobody"}, 0},
	}
	for _, tt := range tests {
		if got := count(tt.f); got != tt.want {
			t.Errorf("%s: %d calls, want %d", tt.name, got, tt.want)
		}
	}
	p, err := w.Query(ctx, Filter{Limit: 1})
	if err != nil || len(p.Entries) != 1 || p.Entries[0].JobID != "job-29" || string(p.Entries[0].Arguments) != `{"n": 29}` {
		t.Fatalf("newest call: %+v %v", p.Entries, err)
	}
	for _, f := range []Filter{{Limit: MaxQueryLimit + 1}, {Limit: -1}, {Cursor: "not a cursor"}} {
		if _, err := w.Query(ctx, f); !errors.Is(err, ErrBadFilter) {
			t.Errorf("%+v: %v, want ErrBadFilter", f, err)
		}
	}
	if _, err := NewWriter(nil, Options{}).Query(ctx, Filter{}); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("without a database: %v", err)
	}
}

// TestQueryByCallerAndTransport: the audit answers "who did this" for a
// key and a person alike, and keeps the web page's own rows apart.
func TestQueryByCallerAndTransport(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w := NewWriter(pool, Options{FlushInterval: 10 * time.Millisecond})
	for _, e := range []Entry{
		{ToolName: "delete_document", APIKey: "admin", Transport: "ui", ConversationID: "c1"},
		{ToolName: "delete_document", Subject: "alice", Transport: "ui", ConversationID: "c2"},
		{ToolName: "delete_document", Subject: "alice", Transport: "http", ConversationID: "c2"},
		{ToolName: "sign_in", Transport: "ui", ErrorCode: "AUTH_ERROR", Error: "not a key of this server"},
		{ToolName: "search_docs", APIKey: "alice", Transport: "rest", ConversationID: "c3"},
	} {
		w.Record(e)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		f    Filter
		want int
	}{
		{"a person, and a key of the same name", Filter{Caller: "alice"}, 3},
		{"a key", Filter{Caller: "admin"}, 1},
		{"the page's rows", Filter{Transport: "ui"}, 3},
		{"who deleted on the page", Filter{Tool: "delete_document", Transport: "ui"}, 2},
		{"a person limited to c9 sees their own", Filter{Visible: []string{"c9"}, VisibleSubject: "alice"}, 2},
		{"a key limited to c1", Filter{Visible: []string{"c1"}, VisibleKey: "nobody"}, 1},
	} {
		p, err := w.Query(ctx, tt.f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Entries) != tt.want {
			t.Errorf("%s: %d rows, want %d", tt.name, len(p.Entries), tt.want)
		}
	}
}
