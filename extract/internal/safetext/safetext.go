// Package safetext makes text read from uploaded files safe to store and to
// show: valid UTF-8, without NUL, which PostgreSQL text columns refuse, and,
// for error messages, on one line, without control characters and bounded in
// length. A file's bytes end up in error messages through parser errors
// that quote what they could not read.
package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageBytes bounds a cleaned error message.
const MaxMessageBytes = 1024

// Message returns s as one line of valid UTF-8 of at most MaxMessageBytes
// bytes: invalid bytes become U+FFFD, line breaks and tabs become spaces,
// and other control and format characters (NUL, escape, bidirectional
// overrides) are written as Go escapes such as \x00 or \u202e.
func Message(s string) string {
	if isCleanMessage(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		// Stop early: what follows would be cut anyway.
		if b.Len() > MaxMessageBytes {
			break
		}
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			b.WriteByte(' ')
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > MaxMessageBytes {
		cut := MaxMessageBytes - len("…")
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
	}
	return out
}

func isCleanMessage(s string) bool {
	if len(s) > MaxMessageBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r >= 0x80 && unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// Error returns err with its message cleaned by Message; errors.Is and
// errors.As still see err. A nil or already clean error is returned as it
// is.
func Error(err error) error {
	if err == nil || isCleanMessage(err.Error()) {
		return err
	}
	return cleanError{err}
}

type cleanError struct{ err error }

func (e cleanError) Error() string { return Message(e.err.Error()) }
func (e cleanError) Unwrap() error { return e.err }

// Text returns s as valid UTF-8 (invalid bytes become U+FFFD) without NUL
// or other C0 control characters except line feed and tab, which are
// dropped, so that extracted text can be stored as it is.
func Text(s string) string {
	if IsClean(s) {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// IsClean reports whether s is what Text returns unchanged.
func IsClean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}
