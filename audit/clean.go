package audit

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Every value of an Entry comes from a caller and may hold what PostgreSQL
// refuses to store: NUL or invalid UTF-8 in a text column, "\u0000" or a lone
// surrogate escape inside a jsonb string, a number beyond numeric's range, a
// tool name longer than its varchar(100), a conversation id too long for a
// btree index entry, or a latency beyond integer. One such row used to make
// the whole batch fail, and a batch is retried until it is stored, so one
// hostile call stopped the audit for everyone. sanitise makes each value
// storable before the row is queued and names the columns it changed, which
// the row keeps in its sanitised column.

// Bounds of the text columns. Identifiers are indexed (conversation_id) or
// short by nature; an error message may be longer but is still bounded so
// that a flood of huge errors cannot fill the queue's memory.
const (
	maxToolNameRunes = 100 // varchar(100)
	maxIdentBytes    = 1 << 10
	maxErrorBytes    = 16 << 10
	// maxNumberLen and maxExponent keep JSON numbers within what numeric
	// stores (131072 digits before the point, 16383 after).
	maxNumberLen = 1000
	maxExponent  = 1000
)

// sanitise returns e with every value storable, and the names of the
// columns it had to change, in table order.
func sanitise(e Entry, maxArgs, maxResult int) Entry {
	var changed []string
	text := func(col string, s *string, max int) {
		if v, ok := cleanText(*s, max); ok {
			*s = v
			changed = append(changed, col)
		}
	}
	text("conversation_id", &e.ConversationID, maxIdentBytes)
	if v, ok := cleanText(e.ToolName, maxErrorBytes); ok || utf8.RuneCountInString(v) > maxToolNameRunes {
		if r := []rune(v); len(r) > maxToolNameRunes {
			v = string(r[:maxToolNameRunes])
		}
		e.ToolName = v
		changed = append(changed, "tool_name")
	}

	args, bad := CleanJSON(e.Arguments)
	args = Redact(args)
	args = Truncate(args, maxArgs)
	// Redact and Truncate re-encode text, which may bring back "\u0000".
	args, bad2 := CleanJSON(args)
	e.Arguments = args
	if bad || bad2 {
		changed = append(changed, "arguments")
	}
	res, bad := CleanJSON(e.Result)
	res, bad2 = CleanJSON(Truncate(res, maxResult))
	e.Result = res
	if bad || bad2 {
		changed = append(changed, "result")
	}

	text("error", &e.Error, maxErrorBytes)
	text("error_code", &e.ErrorCode, maxIdentBytes)
	if e.LatencyMS < 0 || e.LatencyMS > math.MaxInt32 {
		e.LatencyMS = min(max(e.LatencyMS, 0), math.MaxInt32)
		changed = append(changed, "latency_ms")
	}
	text("transport", &e.Transport, maxIdentBytes)
	text("session_id", &e.SessionID, maxIdentBytes)
	text("client_name", &e.ClientName, maxIdentBytes)
	text("client_version", &e.ClientVersion, maxIdentBytes)
	text("api_key_name", &e.APIKey, maxIdentBytes)
	text("subject", &e.Subject, maxIdentBytes)
	e.Sanitised = append(e.Sanitised, changed...)
	return e
}

// cleanText returns s as valid UTF-8 without NUL and at most max bytes long,
// cut at a character boundary; ok reports whether s changed. Invalid bytes
// and NUL become U+FFFD, so the reader sees that something was there.
func cleanText(s string, max int) (string, bool) {
	changed := false
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		changed = true
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
		changed = true
	}
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
		changed = true
	}
	return s, changed
}

// CleanJSON returns raw fit for a PostgreSQL jsonb column, and whether it
// had to change it. Inside strings (keys included), "\u0000", lone surrogate
// escapes and invalid UTF-8 become U+FFFD; a number beyond what numeric
// holds becomes a string of its digits. Input that is not JSON becomes a
// JSON object {"unparsed": text}, cleaned the same way. Everything else is
// kept byte for byte.
func CleanJSON(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return raw, false
	}
	if !json.Valid(raw) {
		b, _ := json.Marshal(map[string]string{"unparsed": strings.ToValidUTF8(string(raw), "\uFFFD")})
		out, _ := CleanJSON(b)
		return out, true
	}
	var out []byte // nil until the first change
	done := 0      // raw[:done] is already in out
	replace := func(from, to int, with string) {
		out = append(out, raw[done:from]...)
		out = append(out, with...)
		done = to
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '"':
			i = cleanString(raw, i+1, replace)
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(raw) && strings.IndexByte("+-.eE0123456789", raw[j]) >= 0 {
				j++
			}
			if !numericFits(string(raw[i:j])) {
				replace(i, j, strconv.Quote(string(raw[i:j])))
			}
			i = j
		default:
			i++
		}
	}
	if out == nil {
		return raw, false
	}
	out = append(out, raw[done:]...)
	return out, true
}

// cleanString scans the string whose contents start at raw[i] (raw is valid
// JSON) and returns the index after its closing quote, calling replace for
// each part jsonb would refuse.
func cleanString(raw []byte, i int, replace func(from, to int, with string)) int {
	const fffd = `\ufffd`
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			if raw[i+1] != 'u' {
				i += 2
				continue
			}
			r := hex4(raw[i+2 : i+6])
			switch {
			case r == 0:
				replace(i, i+6, fffd)
			case r >= 0xD800 && r < 0xDC00:
				if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
					if lo := hex4(raw[i+8 : i+12]); lo >= 0xDC00 && lo < 0xE000 {
						i += 12
						continue
					}
				}
				replace(i, i+6, fffd)
			case r >= 0xDC00 && r < 0xE000:
				replace(i, i+6, fffd)
			}
			i += 6
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				replace(i, i+1, "\uFFFD")
			}
			i += n
		}
	}
	return i
}

// hex4 decodes four hex digits, which valid JSON guarantees after "\u".
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// numericFits reports whether the JSON number n is within numeric's range,
// with room to spare.
func numericFits(n string) bool {
	if len(n) > maxNumberLen {
		return false
	}
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
		return err == nil && exp >= -maxExponent && exp <= maxExponent
	}
	return true
}
