package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP message over maxMCPBody is not decoded. When it is a tools/call,
// the server still answers it as a call that failed, with the contract's
// error, instead of refusing it at the transport: an agent reads a tool
// error and can act on it (add_document then names the upload API and its
// url argument), while a transport error only says the request broke.
//
// The message is read once as it streams by (messageScan), keeping its id,
// method, tool name, the conversation its arguments name and its _meta,
// and none of the rest. From those the transport builds a small stand-in
// call (oversizedCall.message) which takes the path of every call: the
// SDK checks its session and protocol revision and answers it the way the
// client expects (on the SSE event stream, as JSON or as an event stream
// over streamable HTTP, as a line over stdio), and the tool middleware
// limits, logs, counts and audits it. Its _meta carries a mark that only
// this process can make, which oversizeMiddleware answers with the error
// instead of running the tool.

// maxScannedMessage bounds the over-size message read to find its id: past
// it the message is refused at the transport, as a message that is not a
// tool call is.
const maxScannedMessage = 64 << 20

// Bounds of what a scan keeps of a message.
const (
	maxScannedID   = 256
	maxScannedName = 256
	maxScannedMeta = 64 << 10
	maxScannedKey  = 64
)

// oversizeMeta is the _meta key of the stand-in call's mark.
const oversizeMeta = "io.mcpsearch/oversized"

// oversizeNoteKey holds, in the stand-in call's arguments, what the audit
// keeps instead of the arguments.
const oversizeNoteKey = "_note"

// oversizeKey signs the marks of stand-in calls, so that no client can
// make a call of its own look like one.
var oversizeKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

// oversizedCall is what a scan keeps of an over-size tools/call.
type oversizedCall struct {
	ID           json.RawMessage
	Tool         string
	Conversation string
	Meta         json.RawMessage
	// Size is the message's length and ArgsSize that of its arguments
	// (-1 when it has none), in bytes.
	Size, ArgsSize int64
}

// message is the stand-in call: the same id, tool, conversation and _meta
// (which carries the client's protocol revision and progress token) with a
// note in place of the arguments, and the mark.
func (c oversizedCall) message() ([]byte, error) {
	meta := map[string]json.RawMessage{}
	if len(c.Meta) > 0 && json.Unmarshal(c.Meta, &meta) != nil {
		meta = map[string]json.RawMessage{}
	}
	mark, _ := json.Marshal(c.mark())
	meta[oversizeMeta] = mark
	args := map[string]string{oversizeNoteKey: c.note()}
	if c.Conversation != "" {
		args["conversation_id"] = c.Conversation
	}
	type params struct {
		Name      string                     `json:"name"`
		Arguments map[string]string          `json:"arguments"`
		Meta      map[string]json.RawMessage `json:"_meta"`
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  params          `json:"params"`
	}{"2.0", c.ID, "tools/call", params{c.Tool, args, meta}})
}

// note is what the audit keeps of the arguments.
func (c oversizedCall) note() string {
	if c.ArgsSize >= 0 {
		return fmt.Sprintf("arguments of %s not kept: the message was over the %d MB limit", megabytes(c.ArgsSize), maxMCPBody>>20)
	}
	return fmt.Sprintf("a message of %s not kept: it was over the %d MB limit", megabytes(c.Size), maxMCPBody>>20)
}

func megabytes(n int64) string {
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
}

// mark is "size:argsSize:mac", the mac binding the sizes to the tool.
func (c oversizedCall) mark() string {
	sizes := fmt.Sprintf("%d:%d", c.Size, c.ArgsSize)
	return sizes + ":" + oversizeMAC(c.Tool, sizes)
}

func oversizeMAC(tool, sizes string) string {
	m := hmac.New(sha256.New, oversizeKey)
	m.Write([]byte(tool + "\x00" + sizes))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// oversizedMark returns the size of the message a stand-in call replaces,
// if params carry a valid mark.
func oversizedMark(p *mcp.CallToolParamsRaw) (int64, bool) {
	mark, _ := p.GetMeta()[oversizeMeta].(string)
	i := strings.LastIndexByte(mark, ':')
	if i < 0 || !hmac.Equal([]byte(mark[i+1:]), []byte(oversizeMAC(p.Name, mark[:i]))) {
		return 0, false
	}
	size, err := strconv.ParseInt(mark[:strings.IndexByte(mark, ':')], 10, 64)
	return size, err == nil
}

// oversizeError is the error of a tool call whose message was too large,
// size bytes. add_document says which ways take larger files.
func oversizeError(tool string, size int64) *ToolError {
	msg := fmt.Sprintf("the MCP message is larger than %d MB (%s): send smaller arguments", maxMCPBody>>20, megabytes(size))
	if tool == "add_document" {
		msg = fmt.Sprintf("the MCP message is larger than %d MB (%s), so content_base64 carries files up to about %d MB: "+
			"send a larger file through the upload API (POST /v1/conversations/{id}/files, multipart/form-data, field \"file\") "+
			"or give add_document a url to fetch it from", maxMCPBody>>20, megabytes(size), maxMCPBody*3/4>>20)
	}
	return &ToolError{Code: CodeToolError, Status: http.StatusRequestEntityTooLarge, Message: msg}
}

// oversizeMiddleware answers a stand-in call with the error of its
// over-size message. It runs inside the tool middleware, which limits,
// logs, counts and audits the call as any other.
func oversizeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ctr, ok := req.(*mcp.CallToolRequest)
		if !ok || method != "tools/call" {
			return next(ctx, method, req)
		}
		size, ok := oversizedMark(ctr.Params)
		if !ok {
			return next(ctx, method, req)
		}
		te := oversizeError(ctr.Params.Name, size)
		callFrom(ctx).fail(te)
		return newErrorResult(ctr, te), nil
	}
}

// readOversized reads an over-size message, prefix then the rest of r,
// and returns its stand-in call, or false when it is no tools/call with an
// id, or r cannot be read.
func readOversized(prefix []byte, r io.Reader) ([]byte, bool) {
	sc := newMessageScan(maxScannedMessage)
	_, _ = sc.Write(prefix)
	if sc.err == nil {
		if _, err := io.Copy(sc, r); err != nil && sc.err == nil {
			return nil, false
		}
	}
	c, ok := sc.end()
	if !ok {
		return nil, false
	}
	msg, err := c.message()
	return msg, err == nil
}

// messageScan reads one JSON text as it streams by, checking its syntax,
// and keeps of it only what answering it as a tools/call needs. Strings
// are skipped, not stored, so a message of any size costs a few kilobytes.
type messageScan struct {
	limit int64
	n     int64 // bytes seen before the chunk being read
	err   error

	state scanState
	stack []byte // the open objects and arrays: '{' or '['
	key   bool   // the string being read is an object key
	hex   int    // hex digits left in a \u escape
	lit   string // what is left of true, false or null

	// keys[d] is the key of the member being read at depth d+1, for the
	// levels a path is followed through (params.arguments.*).
	keys [3]string

	cap    capture
	keyBuf []byte

	id, method, name, conv, meta []byte
	argsStart, argsEnd           int64
}

type scanState uint8

const (
	scanValue      scanState = iota // a value
	scanFirstValue                  // a value or ']'
	scanFirstKey                    // a key or '}'
	scanKey                         // a key
	scanColon                       // ':'
	scanObjectNext                  // ',' or '}'
	scanArrayNext                   // ',' or ']'
	scanString                      // inside a string
	scanEscape                      // after '\'
	scanUnicode                     // in a \u escape
	scanMinus                       // after a number's '-'
	scanZero                        // a number's leading 0
	scanInt                         // a number's integer digits
	scanDot                         // after a number's '.'
	scanFrac                        // a number's fraction digits
	scanE                           // after a number's 'e'
	scanESign                       // after the exponent's sign
	scanExp                         // the exponent's digits
	scanLiteral                     // inside true, false or null
	scanEnd                         // after the message
)

// capture copies one key or value as it streams by, up to a bound.
type capture struct {
	dst    *[]byte
	limit  int
	depth  int // of the value captured
	from   int // where it starts in the chunk being read
	active bool
	over   bool
}

var (
	errScanTooLarge = errors.New("the message is larger than can be scanned")
	errScanSyntax   = errors.New("the message is not JSON")
	errScanShape    = errors.New("the message is not one JSON-RPC object")
	errScanDeep     = errors.New("the message nests too deep")
)

// stringStop marks the bytes that end a run of plain string bytes.
var stringStop = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func newMessageScan(limit int64) *messageScan {
	return &messageScan{limit: limit, argsStart: -1, argsEnd: -1}
}

// Write reads the next bytes of the message. Its error is the scan's
// once it has given up, so that io.Copy stops reading.
func (s *messageScan) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.n+int64(len(p)) > s.limit {
		s.err = errScanTooLarge
		return 0, s.err
	}
	s.cap.from = 0
	for i := 0; i < len(p) && s.err == nil; i++ {
		b := p[i]
		switch s.state {
		case scanValue, scanFirstValue:
			switch {
			case isSpace(b):
			case b == ']' && s.state == scanFirstValue:
				s.stack = s.stack[:len(s.stack)-1]
				s.valueEnd(p, i+1)
			default:
				s.valueStart(p, i, b)
			}
		case scanFirstKey, scanKey:
			switch {
			case isSpace(b):
			case b == '}' && s.state == scanFirstKey:
				s.stack = s.stack[:len(s.stack)-1]
				s.valueEnd(p, i+1)
			case b == '"':
				s.keyStart(i)
			default:
				s.err = errScanSyntax
			}
		case scanColon:
			switch {
			case isSpace(b):
			case b == ':':
				s.state = scanValue
			default:
				s.err = errScanSyntax
			}
		case scanObjectNext, scanArrayNext:
			closer := byte('}')
			if s.state == scanArrayNext {
				closer = ']'
			}
			switch {
			case isSpace(b):
			case b == ',' && s.state == scanObjectNext:
				s.state = scanKey
			case b == ',':
				s.state = scanValue
			case b == closer:
				s.stack = s.stack[:len(s.stack)-1]
				s.valueEnd(p, i+1)
			default:
				s.err = errScanSyntax
			}
		case scanString:
			// Skip the run of plain bytes: a long string (a file in
			// base64) costs one pass over a table, no copy.
			for i < len(p) && !stringStop[p[i]] {
				i++
			}
			if i == len(p) {
				break
			}
			switch p[i] {
			case '"':
				if s.key {
					s.keyEnd(p, i+1)
				} else {
					s.valueEnd(p, i+1)
				}
			case '\\':
				s.state = scanEscape
			default:
				s.err = errScanSyntax // a control character
			}
		case scanEscape:
			switch b {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.state = scanString
			case 'u':
				s.state, s.hex = scanUnicode, 4
			default:
				s.err = errScanSyntax
			}
		case scanUnicode:
			if !isHex(b) {
				s.err = errScanSyntax
			} else if s.hex--; s.hex == 0 {
				s.state = scanString
			}
		case scanLiteral:
			if b != s.lit[0] {
				s.err = errScanSyntax
			} else if s.lit = s.lit[1:]; s.lit == "" {
				s.valueEnd(p, i+1)
			}
		case scanEnd:
			if !isSpace(b) {
				s.err = errScanSyntax
			}
		default:
			if s.number(b) {
				continue
			}
			// The byte after a number ends it and is read again.
			s.valueEnd(p, i)
			i--
		}
	}
	if s.cap.active && s.err == nil {
		s.keep(p[s.cap.from:])
	}
	s.n += int64(len(p))
	if s.err != nil {
		return 0, s.err
	}
	return len(p), nil
}

// number reads b inside a number: false when b ends it (a syntax error
// sets err).
func (s *messageScan) number(b byte) bool {
	digit := b >= '0' && b <= '9'
	switch s.state {
	case scanMinus:
		switch {
		case b == '0':
			s.state = scanZero
		case digit:
			s.state = scanInt
		default:
			s.err = errScanSyntax
		}
		return true
	case scanZero, scanInt:
		switch {
		case digit && s.state == scanInt:
		case b == '.':
			s.state = scanDot
		case b == 'e' || b == 'E':
			s.state = scanE
		default:
			return false
		}
		return true
	case scanDot:
		if !digit {
			s.err = errScanSyntax
		}
		s.state = scanFrac
		return true
	case scanFrac:
		switch {
		case digit:
		case b == 'e' || b == 'E':
			s.state = scanE
		default:
			return false
		}
		return true
	case scanE:
		switch {
		case b == '+' || b == '-':
			s.state = scanESign
		case digit:
			s.state = scanExp
		default:
			s.err = errScanSyntax
		}
		return true
	case scanESign:
		if !digit {
			s.err = errScanSyntax
		}
		s.state = scanExp
		return true
	case scanExp:
		return digit
	}
	s.err = errScanSyntax
	return true
}

// valueStart begins the value whose first byte is p[i].
func (s *messageScan) valueStart(p []byte, i int, b byte) {
	depth := len(s.stack)
	if depth == 0 && b != '{' {
		s.err = errScanShape
		return
	}
	// A key given twice counts once, for its last value, as decoders read
	// it: what an earlier value held is forgotten.
	switch {
	case s.at(depth, "params"):
		s.name, s.meta, s.conv, s.argsStart, s.argsEnd = nil, nil, nil, -1, -1
	case s.at(depth, "params", "arguments"):
		s.conv, s.argsEnd = nil, -1
	}
	switch {
	case s.at(depth, "id"):
		s.startCapture(&s.id, maxScannedID, i)
	case s.at(depth, "method"):
		s.startCapture(&s.method, maxScannedName, i)
	case s.at(depth, "params", "name"):
		s.startCapture(&s.name, maxScannedName, i)
	case s.at(depth, "params", "_meta"):
		s.startCapture(&s.meta, maxScannedMeta, i)
	case s.at(depth, "params", "arguments"):
		s.argsStart = s.n + int64(i)
	case s.at(depth, "params", "arguments", "conversation_id"):
		s.startCapture(&s.conv, maxScannedName, i)
	}
	switch b {
	case '{', '[':
		if depth >= maxMessageDepth {
			s.err = errScanDeep
			return
		}
		s.stack = append(s.stack, b)
		s.state = scanFirstKey
		if b == '[' {
			s.state = scanFirstValue
		}
	case '"':
		s.state, s.key = scanString, false
	case '-':
		s.state = scanMinus
	case '0':
		s.state = scanZero
	case 't':
		s.state, s.lit = scanLiteral, "rue"
	case 'f':
		s.state, s.lit = scanLiteral, "alse"
	case 'n':
		s.state, s.lit = scanLiteral, "ull"
	default:
		if b >= '1' && b <= '9' {
			s.state = scanInt
			return
		}
		s.err = errScanSyntax
	}
}

// valueEnd ends the value read up to p[end], exclusive.
func (s *messageScan) valueEnd(p []byte, end int) {
	depth := len(s.stack)
	if s.cap.active && s.cap.depth == depth {
		s.endCapture(p, end)
	}
	if s.at(depth, "params", "arguments") {
		s.argsEnd = s.n + int64(end)
	}
	switch {
	case depth == 0:
		s.state = scanEnd
	case s.stack[depth-1] == '{':
		s.state = scanObjectNext
	default:
		s.state = scanArrayNext
	}
}

// at reports whether the value at depth is the member at path of the
// message object, through objects only.
func (s *messageScan) at(depth int, path ...string) bool {
	if depth != len(path) {
		return false
	}
	for d := range depth {
		if s.stack[d] != '{' || s.keys[d] != path[d] {
			return false
		}
	}
	return true
}

// follows reports whether the keys at depth matter: those of the message
// object, of params and of params.arguments.
func (s *messageScan) follows(depth int) bool {
	switch depth {
	case 1:
		return true
	case 2:
		return s.at(1, "params") && s.stack[1] == '{'
	case 3:
		return s.at(2, "params", "arguments") && s.stack[2] == '{'
	}
	return false
}

func (s *messageScan) keyStart(i int) {
	s.state, s.key = scanString, true
	if depth := len(s.stack); s.follows(depth) {
		s.keys[depth-1] = ""
		s.startCapture(&s.keyBuf, maxScannedKey, i)
	}
}

func (s *messageScan) keyEnd(p []byte, end int) {
	s.state = scanColon
	depth := len(s.stack)
	if !s.cap.active || s.cap.dst != &s.keyBuf {
		return
	}
	s.endCapture(p, end)
	s.keys[depth-1] = unquote(s.keyBuf)
}

func (s *messageScan) startCapture(dst *[]byte, limit, i int) {
	*dst = (*dst)[:0]
	s.cap = capture{dst: dst, limit: limit, depth: len(s.stack), from: i, active: true}
}

func (s *messageScan) endCapture(p []byte, end int) {
	s.keep(p[s.cap.from:end])
	if s.cap.over {
		*s.cap.dst = nil
	}
	s.cap.active = false
}

// keep adds b to the capture, or drops it once over its bound.
func (s *messageScan) keep(b []byte) {
	if s.cap.over {
		return
	}
	if len(*s.cap.dst)+len(b) > s.cap.limit {
		s.cap.over = true
		*s.cap.dst = nil
		return
	}
	*s.cap.dst = append(*s.cap.dst, b...)
}

// end finishes the scan once the message is read whole, and returns the
// call it makes, if it is a tools/call with an id and a tool name.
func (s *messageScan) end() (oversizedCall, bool) {
	if s.err != nil || s.state != scanEnd {
		return oversizedCall{}, false
	}
	c := oversizedCall{Size: s.n, ArgsSize: -1, Meta: s.meta, Tool: unquote(s.name), Conversation: unquote(s.conv)}
	if s.argsStart >= 0 && s.argsEnd >= s.argsStart {
		c.ArgsSize = s.argsEnd - s.argsStart
	}
	if len(s.id) == 0 || (s.id[0] != '"' && s.id[0] != '-' && (s.id[0] < '0' || s.id[0] > '9')) {
		return oversizedCall{}, false
	}
	c.ID = append(json.RawMessage(nil), s.id...)
	if unquote(s.method) != "tools/call" || c.Tool == "" {
		return oversizedCall{}, false
	}
	return c, true
}

// unquote decodes a JSON string, "" for anything else.
func unquote(raw []byte) string {
	var v string
	if len(raw) < 2 || raw[0] != '"' || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return v
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func isHex(b byte) bool {
	return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' || b >= 'A' && b <= 'F'
}
