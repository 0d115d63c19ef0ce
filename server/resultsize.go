package server

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
)

// resultLimit bounds one tool result, in bytes (MCP_tool_result_max_kb):
// its text, and its structured content as JSON, are each at most this
// long, so that no answer fills an agent's context. Each tool fits its own
// results, cutting what it can best resume (a list's items, a page's text,
// ranked passages) and saying in the result how to get the rest; the
// wrapper every tool runs in (typed) cuts any text still too long.
type resultLimit int

func newResultLimit(cfg config.Config) resultLimit {
	return resultLimit(max(cfg.ToolResultMaxKB, config.MinToolResultKB) << 10)
}

// String is the limit as the README and the notes state it: "64 KB".
func (l resultLimit) String() string { return fmt.Sprintf("%d KB", int(l)>>10) }

// fits reports whether a result of text and structured content out stays
// within the limit.
func (l resultLimit) fits(text string, out any) bool {
	return len(text) <= int(l) && jsonLen(out) <= int(l)
}

// fitting returns how many of n items a result can hold: the largest k in
// 0..n for which render(k), the result's text and structured content with
// its first k items, fits. A result grows with its items, so a binary
// search finds k with a few renders.
func (l resultLimit) fitting(n int, render func(k int) (string, any)) int {
	if l.fits(render(n)) {
		return n
	}
	lo, hi := 0, n-1 // render(lo) is assumed to fit; render(hi+1) does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if l.fits(render(mid)) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// keepFitting cuts *list, a list of the result render renders, to its
// longest beginning with which the result fits.
func keepFitting[T any](l resultLimit, list *[]T, render func() (string, any)) {
	all := *list
	k := l.fitting(len(all), func(k int) (string, any) {
		*list = all[:k]
		return render()
	})
	*list = all[:k]
}

// note says that a result was cut to the limit, and how to get the rest.
func (l resultLimit) note(rest string) string {
	return fmt.Sprintf("[Cut to stay within the %s result limit (MCP_tool_result_max_kb): %s]", l, rest)
}

// jsonLen is the length of v as JSON, as structured content carries it.
func jsonLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// clipBytes returns the longest prefix of s of at most n bytes that ends
// on a character boundary.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

// fitString returns the longest prefix of s for which render, given the
// prefix, fits the limit; "" when none does.
func (l resultLimit) fitString(s string, render func(prefix string) (string, any)) string {
	if l.fits(render(s)) {
		return s
	}
	lo, hi := 0, len(s)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if l.fits(render(clipBytes(s, mid))) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return clipBytes(s, lo)
}

// resultCap is what typed needs to hold a tool's results to the limit.
type resultCap struct {
	limit resultLimit
	// more says how to get the rest of a cut result.
	more string
	log  *slog.Logger
}

// capResult is the last guard of the limit, applied to every successful
// tool result: text longer than the limit is cut, keeping its beginning,
// with a note naming more, the tool's way to the rest. Structured content
// cannot be cut without breaking its schema: a tool whose content passes
// the limit is a fault, logged.
func (l resultLimit) capResult(log *slog.Logger, tool, more string, res *mcp.CallToolResult, out any) {
	if n := jsonLen(out); n > int(l) {
		log.Error("tool result over the size limit", "tool", tool, "structured_bytes", n, "limit_bytes", int(l))
	}
	if res == nil {
		return
	}
	total := 0
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			total += len(t.Text)
		}
	}
	if total <= int(l) {
		return
	}
	note := "\n\n" + l.note(more)
	room := int(l) - len(note)
	for _, c := range res.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			continue
		}
		if len(t.Text) > room {
			t.Text = clipBytes(t.Text, max(room, 0)) + note
			note, room = "", 0
			continue
		}
		room -= len(t.Text)
	}
	log.Warn("tool result text cut to the size limit", "tool", tool, "text_bytes", total, "limit_bytes", int(l))
}

// plural is n and the noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
