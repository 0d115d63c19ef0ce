package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStdioAnswersEverythingReadBeforeEOF: an agent writes its requests and
// closes stdin at once; every request read is still answered, and a
// malformed line gets a parse error instead of ending the server.
func TestStdioAnswersEverythingReadBeforeEOF(t *testing.T) {
	h := newHarness(t, nil)
	// Slow enough that the calls are still running when stdin ends.
	h.fake.SetDelay(300 * time.Millisecond)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"agent","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"one"}}}`,
		`hello, this is not JSON`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"two"}}}`,
		`42`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"three"}}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.srv.ServeIO(ctx, strings.NewReader(in), &out); err != nil {
		t.Fatalf("ServeIO: %v", err)
	}
	answered := map[string]bool{}
	var parseErrors, invalid int
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage
			Result *struct{ IsError bool }
			Error  *struct{ Code int }
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatalf("stdout holds a line that is not JSON: %q", sc.Text())
		}
		switch {
		case msg.Error != nil && msg.Error.Code == -32700:
			parseErrors++
		case msg.Error != nil && msg.Error.Code == -32600:
			invalid++
		case msg.Result != nil:
			if msg.Result.IsError {
				t.Errorf("call %s failed: %s", msg.ID, sc.Text())
			}
			answered[string(msg.ID)] = true
		}
	}
	for _, id := range []string{"1", "2", "3", "4"} {
		if !answered[id] {
			t.Errorf("request %s was read but not answered; stdout:\n%s", id, out.String())
		}
	}
	if parseErrors != 1 || invalid != 1 {
		t.Errorf("%d parse errors and %d invalid requests, want 1 and 1", parseErrors, invalid)
	}
}
