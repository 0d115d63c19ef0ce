package audit

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Outcomes a Filter may ask for besides an error code.
const (
	// OutcomeOK keeps the calls that succeeded.
	OutcomeOK = "ok"
	// OutcomeError keeps the calls that failed, whatever their code.
	OutcomeError = "error"
)

// MaxQueryLimit bounds Filter.Limit.
const MaxQueryLimit = 500

// ErrBadFilter reports a filter Query cannot run: a limit out of range, or a
// cursor it did not return.
var ErrBadFilter = errors.New("audit: bad filter")

// Filter selects calls for Query. Zero fields select everything.
type Filter struct {
	Tool   string
	APIKey string
	// Caller keeps the calls of a key of that name or of a person of that
	// subject: who did something, whichever way they signed in.
	Caller string
	// Transport keeps the calls of one transport: stdio, sse, http, rest
	// or ui (the web page's own actions and playground).
	Transport string
	// Outcome is OutcomeOK, OutcomeError or an error code (RATE_LIMITED,
	// TOOL_ERROR, ...); "" keeps every call.
	Outcome      string
	Conversation string
	// Visible, when not nil, limits the calls to those of these
	// conversations, or made with the key VisibleKey or by the person
	// VisibleSubject: what a caller limited to some conversations may see
	// of the audit. An empty, non-nil list keeps the caller's own calls
	// only.
	Visible        []string
	VisibleKey     string
	VisibleSubject string
	// Since and Until bound the calls' time: Since included, Until not.
	Since, Until time.Time
	// Limit is the most calls of the page, 1 to MaxQueryLimit; 0 means 50.
	Limit int
	// Cursor continues after the page whose Next it was.
	Cursor string
}

// Page is a page of calls, newest first.
type Page struct {
	Entries []Entry
	// Next is the cursor of the following page; "" on the last.
	Next string
}

// Query returns a page of the calls f selects, newest first, with their
// job. Each filter reads one of the table's indexes where it can (time,
// tool, conversation); the others are checked on the rows the scan
// reads.
func Query(ctx context.Context, pool *pgxpool.Pool, f Filter) (Page, error) {
	if pool == nil {
		return Page{}, ErrNoDatabase
	}
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > MaxQueryLimit:
		return Page{}, fmt.Errorf("%w: limit %d is outside 1..%d", ErrBadFilter, f.Limit, MaxQueryLimit)
	}
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Tool != "" {
		where = append(where, "tool_name = "+arg(f.Tool))
	}
	if f.APIKey != "" {
		where = append(where, "api_key_name = "+arg(f.APIKey))
	}
	if f.Caller != "" {
		a := arg(f.Caller)
		where = append(where, fmt.Sprintf("(api_key_name = %s OR subject = %s)", a, a))
	}
	if f.Transport != "" {
		where = append(where, "transport = "+arg(f.Transport))
	}
	switch f.Outcome {
	case "":
	case OutcomeOK:
		where = append(where, "coalesce(error_code, '') = ''")
	case OutcomeError:
		where = append(where, "coalesce(error_code, '') <> ''")
	default:
		where = append(where, "error_code = "+arg(f.Outcome))
	}
	if f.Conversation != "" {
		where = append(where, "conversation_id = "+arg(f.Conversation))
	}
	if f.Visible != nil {
		// An empty name matches no row: NULL = '' is not true.
		where = append(where, fmt.Sprintf("(conversation_id = ANY(%s::text[]) OR api_key_name = %s OR subject = %s)",
			arg(f.Visible), arg(f.VisibleKey), arg(f.VisibleSubject)))
	}
	if !f.Since.IsZero() {
		where = append(where, "created_at >= "+arg(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, "created_at < "+arg(f.Until))
	}
	if f.Cursor != "" {
		at, id, err := parseCursor(f.Cursor)
		if err != nil {
			return Page{}, err
		}
		// Times are compared at PostgreSQL's microseconds, as cursors
		// keep them.
		where = append(where, fmt.Sprintf("(created_at, id) < (%s, %s::uuid)", arg(at), arg(id)))
	}
	q := `SELECT id, server_id, coalesce(conversation_id, ''), tool_name, arguments, result,
		coalesce(error, ''), coalesce(error_code, ''), coalesce(latency_ms, 0), coalesce(transport, ''), coalesce(session_id, ''),
		coalesce(client_name, ''), coalesce(client_version, ''), coalesce(api_key_name, ''), coalesce(subject, ''), coalesce(job_id, ''),
		created_at, sanitised
		FROM chat_mcp_tool_calls`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT " + arg(f.Limit+1)
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return Page{}, fmt.Errorf("audit query: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		var args, res []byte
		err := r.Scan(&e.ID, &e.ServerID, &e.ConversationID, &e.ToolName, &args, &res, &e.Error, &e.ErrorCode, &e.LatencyMS,
			&e.Transport, &e.SessionID, &e.ClientName, &e.ClientVersion, &e.APIKey, &e.Subject, &e.JobID, &e.CreatedAt, &e.Sanitised)
		e.Arguments, e.Result = args, res
		return e, err
	})
	if err != nil {
		return Page{}, fmt.Errorf("audit query: %w", err)
	}
	p := Page{Entries: out}
	if len(out) > f.Limit {
		p.Entries = out[:f.Limit]
		last := p.Entries[f.Limit-1]
		p.Next = cursorAfter(last.CreatedAt, last.ID)
	}
	if p.Entries == nil {
		p.Entries = []Entry{}
	}
	return p, nil
}

// Query returns a page of the calls f selects from the writer's database
// (Query); ErrNoDatabase when its rows go to the log.
func (w *Writer) Query(ctx context.Context, f Filter) (Page, error) { return Query(ctx, w.pool, f) }

// cursorAfter is the cursor of the calls after the one at t with id:
// URL-safe base64 of the time in microseconds and the id.
func cursorAfter(t time.Time, id uuid.UUID) string {
	b := make([]byte, 8, 24)
	binary.BigEndian.PutUint64(b, uint64(t.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(append(b, id[:]...))
}

func parseCursor(s string) (time.Time, uuid.UUID, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 24 {
		return time.Time{}, uuid.UUID{}, fmt.Errorf("%w: the cursor is not one this server returned: start again from the first page", ErrBadFilter)
	}
	id, _ := uuid.FromBytes(b[8:])
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))), id, nil
}
