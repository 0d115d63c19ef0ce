package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStdioLine bounds one message read from stdin, as over HTTP.
const maxStdioLine = maxMCPBody

// stdioGrace is how long, past the longest tool timeout, the server waits
// after stdin closes for the answers of requests it has read.
const stdioGrace = 5 * time.Second

// ServeStdio speaks MCP over stdin and stdout until stdin closes or ctx is
// done.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.ServeIO(ctx, os.Stdin, os.Stdout)
}

// ServeIO speaks MCP over newline-delimited JSON on r and w, as agents use
// stdio: a line that is not JSON is answered with a JSON-RPC parse error
// (-32700) and the server goes on, and when r ends every request already
// read is answered before the server returns (bounded by the tools'
// timeouts).
func (s *Server) ServeIO(ctx context.Context, r io.Reader, w io.Writer) error {
	p := newStdioPipe(w, s.longestTimeout()+stdioGrace)
	go p.pump(r)
	var t mcp.Transport = &mcp.IOTransport{Reader: p.sdkIn, Writer: p}
	if s.tracer != nil {
		t = rpcIDTransport{t}
	}
	err := s.MCP("stdio").Run(ctx, t)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("serve stdio: %w", err)
}

// longestTimeout is the longest timeout of an offered tool.
func (s *Server) longestTimeout() time.Duration {
	d := s.cfg.ToolTimeout
	for _, def := range s.tools.defs {
		d = max(d, def.timeout)
	}
	return d
}

// stdioPipe stands between the process's stdio and the SDK. It forwards
// well-formed lines, answers malformed ones itself, and keeps track of the
// requests not yet answered so that end of input waits for them.
type stdioPipe struct {
	out   io.Writer
	sdkIn *io.PipeReader
	toSDK *io.PipeWriter
	drain time.Duration

	writeMu sync.Mutex

	mu      sync.Mutex
	pending map[string]bool // ids of requests read and not answered
	idle    chan struct{}   // closed when pending becomes empty
}

func newStdioPipe(out io.Writer, drain time.Duration) *stdioPipe {
	pr, pw := io.Pipe()
	return &stdioPipe{out: out, sdkIn: pr, toSDK: pw, drain: drain, pending: map[string]bool{}}
}

// pump reads r line by line until it ends, then waits for the answers of
// pending requests and ends the SDK's input.
func (p *stdioPipe) pump(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxStdioLine)
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := p.forward(line); ferr != nil {
				break
			}
		}
		if err != nil {
			var long *lineTooLong
			if errors.As(err, &long) {
				if long.call == nil {
					p.reply(nil, -32600, fmt.Sprintf("Invalid Request: message larger than %d MB", maxStdioLine>>20))
				} else if ferr := p.forward(long.call); ferr != nil {
					break
				}
				continue
			}
			break
		}
	}
	p.waitAnswered()
	p.toSDK.Close()
}

// lineTooLong reports a line over the limit. call is the stand-in call
// of an over-size tools/call (see oversize.go), nil for any other line.
type lineTooLong struct {
	call []byte
}

func (e *lineTooLong) Error() string { return "line too long" }

// readLine returns the next line without its newline. A line longer than
// limit is not kept: it is read through a scan to its end and reported as
// a *lineTooLong.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			sc := newMessageScan(maxScannedMessage)
			_, _ = sc.Write(line)
			line = nil
			// The scan gives up past its bound; the line is still read
			// to its end.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, _ = sc.Write(chunk)
				chunk, err = br.ReadSlice('\n')
			}
			_, _ = sc.Write(bytes.TrimRight(chunk, "\r\n"))
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			long := &lineTooLong{}
			if c, ok := sc.end(); ok {
				long.call, _ = c.message()
			}
			return nil, long
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// rpcHead is what the pipe reads of a message: enough to pair requests
// with their answers.
type rpcHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func heads(line []byte) ([]rpcHead, bool) {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '[' {
		var batch []rpcHead
		return batch, json.Unmarshal(line, &batch) == nil && len(batch) > 0
	}
	var one rpcHead
	return []rpcHead{one}, json.Unmarshal(line, &one) == nil && (len(line) > 0 && line[0] == '{')
}

// forward hands a line to the SDK, or answers it when it is no JSON-RPC
// message at all.
func (p *stdioPipe) forward(line []byte) error {
	if !json.Valid(line) {
		p.reply(nil, -32700, "Parse error: the line is not JSON")
		return nil
	}
	hs, ok := heads(line)
	if !ok {
		p.reply(nil, -32600, "Invalid Request: send a JSON-RPC object or batch")
		return nil
	}
	if tooDeep(line, maxMessageDepth) {
		// The SDK refuses such a message by ending the session; answer
		// each request of it instead and go on.
		for _, h := range hs {
			if len(h.ID) > 0 && string(h.ID) != "null" {
				p.reply(h.ID, -32600, fmt.Sprintf("Invalid Request: the message nests deeper than %d levels", maxMessageDepth))
			}
		}
		return nil
	}
	p.mu.Lock()
	for _, h := range hs {
		if h.Method != "" && len(h.ID) > 0 && string(h.ID) != "null" {
			p.pending[string(h.ID)] = true
		}
	}
	p.mu.Unlock()
	_, err := p.toSDK.Write(append(line, '\n'))
	return err
}

// maxMessageDepth is the deepest nesting of objects and arrays the SDK
// decodes.
const maxMessageDepth = 1000

// tooDeep reports whether the objects and arrays of a valid JSON text nest
// deeper than limit.
func tooDeep(line []byte, limit int) bool {
	depth, inString, escaped := 0, false, false
	for _, b := range line {
		switch {
		case inString && escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case inString && b == '"':
			inString = false
		case inString:
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			if depth++; depth > limit {
				return true
			}
		case b == '}' || b == ']':
			depth--
		}
	}
	return false
}

// reply writes an error answer of the pipe's own.
func (p *stdioPipe) reply(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	_, _ = p.out.Write(append(b, '\n'))
}

// Write takes one message of the SDK (it writes each whole, with its
// newline) to the output and marks the requests it answers.
func (p *stdioPipe) Write(b []byte) (int, error) {
	p.writeMu.Lock()
	n, err := p.out.Write(b)
	p.writeMu.Unlock()
	if hs, ok := heads(b); ok {
		p.mu.Lock()
		for _, h := range hs {
			if h.Method == "" && (h.Result != nil || h.Error != nil) {
				delete(p.pending, string(h.ID))
			}
		}
		if len(p.pending) == 0 && p.idle != nil {
			close(p.idle)
			p.idle = nil
		}
		p.mu.Unlock()
	}
	return n, err
}

// Close is called by the SDK when the session ends.
func (p *stdioPipe) Close() error { return nil }

// waitAnswered returns once every request read has been answered, or after
// the drain bound.
func (p *stdioPipe) waitAnswered() {
	p.mu.Lock()
	if len(p.pending) == 0 {
		p.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	p.idle = idle
	p.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(p.drain):
	}
}
