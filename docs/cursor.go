package docs

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"
	"unicode/utf8"
)

// Paged listings (ListFilesPage, ListConversationsPage) return at most
// MaxListLimit items a page, DefaultListLimit when the caller sets none.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// MaxCursorLen bounds a cursor as callers send it back: the longest one a
// listing returns (a conversation's, whose id is at most
// MaxConversationIDLen bytes) is about 370 characters.
const MaxCursorLen = 512

// checkLimit resolves a page's limit: 0 is DefaultListLimit, and anything
// outside 1..MaxListLimit is refused.
func checkLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultListLimit, nil
	case limit < 1 || limit > MaxListLimit:
		return 0, fmt.Errorf("docs: %w: limit %d is out of range: send 1 to %d (default %d)", ErrInvalidArgument, limit, MaxListLimit, DefaultListLimit)
	}
	return limit, nil
}

// cursor is a position in a listing: the sort key of the last item a page
// returned, newest first, and a digest of what the listing selects, so that
// a cursor continues only the listing it came from. Pages are read by keyset
// (items strictly after the key), never by offset: an item written while a
// caller pages does not shift the items after the cursor, so every item
// that existed when the listing began is returned once (unless deleted).
//
// A cursor is opaque to callers: URL-safe base64 of a version byte, the
// listing's kind, the digest, the time in microseconds (PostgreSQL's
// precision) and the key that breaks ties between equal times (a file's
// 16-byte id, a conversation's id).
type cursor struct {
	kind   byte
	filter uint64
	at     time.Time
	key    []byte
}

// Kinds of cursor, one per listing.
const (
	filesCursor         = 'f'
	conversationsCursor = 'c'
)

const cursorVersion = 1

// cursorHeader is the version, kind, digest and time.
const cursorHeader = 1 + 1 + 8 + 8

// listingDigest names what a listing selects, for its cursors.
func listingDigest(kind byte, parts ...string) uint64 {
	h := fnv.New64a()
	h.Write([]byte{kind})
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func (c cursor) String() string {
	b := make([]byte, cursorHeader, cursorHeader+len(c.key))
	b[0], b[1] = cursorVersion, c.kind
	binary.BigEndian.PutUint64(b[2:], c.filter)
	binary.BigEndian.PutUint64(b[10:], uint64(c.at.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(append(b, c.key...))
}

// parseCursor reads a cursor a page of the listing kind, selecting filter,
// returned. "" is the start of the listing (nil). Anything else is refused
// with ErrInvalidArgument, saying what to send.
func parseCursor(s string, kind byte, filter uint64, what string) (*cursor, error) {
	if s == "" {
		return nil, nil
	}
	bad := func(why string) error {
		shown := s
		if len(shown) > 40 || !utf8.ValidString(shown) {
			shown = fmt.Sprintf("%.40q...", s)
		} else {
			shown = fmt.Sprintf("%q", s)
		}
		return fmt.Errorf("docs: %w: cursor %s %s: send the next_cursor of the previous page of %s as it came, or leave cursor out to start from the newest",
			ErrInvalidArgument, shown, why, what)
	}
	if len(s) > MaxCursorLen {
		return nil, bad(fmt.Sprintf("is %d characters long, more than any cursor", len(s)))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) <= cursorHeader || b[0] != cursorVersion {
		return nil, bad("is not one this server returned")
	}
	if b[1] != kind {
		return nil, bad("belongs to another listing")
	}
	c := &cursor{kind: b[1], filter: binary.BigEndian.Uint64(b[2:]), key: b[cursorHeader:]}
	if c.filter != filter {
		return nil, bad("was returned for another selection (conversation, status or prefix)")
	}
	c.at = time.UnixMicro(int64(binary.BigEndian.Uint64(b[10:])))
	return c, nil
}

// Cursor encodes, for packages with listings of their own (jobs), the
// position after an item of a listing: kind is a byte naming the listing
// (one no other listing uses), parts what it selects, at and key the
// item's time and the key that breaks ties. Cursors are opaque to callers
// and read back by ParseCursor.
func Cursor(kind byte, parts []string, at time.Time, key []byte) string {
	return cursor{kind: kind, filter: listingDigest(kind, parts...), at: at, key: key}.String()
}

// ParseCursor reads a cursor of Cursor for the listing kind selecting
// parts; what names the listing in the error. ok is false for "", the
// start of the listing. A cursor of another listing or selection, or none
// a server made, is refused with ErrInvalidArgument saying what to send.
func ParseCursor(s string, kind byte, parts []string, what string) (at time.Time, key []byte, ok bool, err error) {
	c, err := parseCursor(s, kind, listingDigest(kind, parts...), what)
	if err != nil || c == nil {
		return time.Time{}, nil, false, err
	}
	return c.at, c.key, true, nil
}
