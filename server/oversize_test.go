package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scanAll scans msg fed in chunks of the given sizes (cycled), the whole
// message at once when sizes is empty.
func scanAll(msg []byte, limit int64, sizes ...int) (oversizedCall, bool, error) {
	sc := newMessageScan(limit)
	for i, k := 0, 0; i < len(msg); k++ {
		n := len(msg) - i
		if len(sizes) > 0 {
			n = min(n, sizes[k%len(sizes)])
		}
		_, _ = sc.Write(msg[i : i+n])
		i += n
	}
	c, ok := sc.end()
	return c, ok, sc.err
}

// tsCall is a tools/call laid out as the TypeScript SDK writes it: "id"
// and "jsonrpc" after "params", so the id comes after the arguments.
func tsCall(id, tool, args string) string {
	return `{"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `},"jsonrpc":"2.0","id":` + id + `}`
}

func TestMessageScanFindsTheCall(t *testing.T) {
	big := strings.Repeat("QUJD", 5<<20/4)
	decoys := `{"id":99,"method":"initialize","params":{"name":"decoy","arguments":{"conversation_id":"decoy"}},` +
		`"list":[{"name":"decoy","id":5},[[{"_meta":1}]]],"n":[-0.5e+10,0,1E3,12.25e-3,-0],"b":[true,false,null],"e":{},"a":[]}`
	tests := []struct {
		name, msg string
		want      oversizedCall
	}{{
		name: "id last, a huge string",
		msg: `{"method":"tools/call","params":{"name":"add_document","arguments":{"conversation_id":"c1","content_base64":"` + big +
			`","file_name":"a.pdf"},"_meta":{"progressToken":7,"x":{"y":[1,2]}}},"jsonrpc":"2.0","id":42}`,
		want: oversizedCall{ID: json.RawMessage(`42`), Tool: "add_document", Conversation: "c1", Meta: json.RawMessage(`{"progressToken":7,"x":{"y":[1,2]}}`)},
	}, {
		name: "id first, a string id with escapes",
		msg:  `{"id":"a\"b\\\u00e9\/","jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"query":"` + big + `"},"name":"search_docs"}}`,
		want: oversizedCall{ID: json.RawMessage(`"a\"b\\\u00e9\/"`), Tool: "search_docs"},
	}, {
		name: "escaped keys and values",
		msg:  `{"\u0069d":-7,"m\u0065thod":"tools\/call","params":{"n\u0061me":"web\u005fsearch","arguments":{"conversation\u005fid":"c\u00e9","q":"` + big + `"}}}`,
		want: oversizedCall{ID: json.RawMessage(`-7`), Tool: "web_search", Conversation: "cé"},
	}, {
		name: "nested decoys",
		msg: `{"jsonrpc":"2.0","extra":{"id":1,"method":"x","params":{"name":"decoy"}},"params":{"arguments":` + decoys +
			`,"name":"fetch_url","more":` + decoys + `},"method":"tools/call","id":"real"}`,
		want: oversizedCall{ID: json.RawMessage(`"real"`), Tool: "fetch_url"},
	}, {
		name: "whitespace everywhere, the last of duplicate keys",
		msg: " \r\n\t{ \"id\" : 1 , \"id\" : 2.5e1 ,\n\"method\":\"tools/call\", \"params\" :\n{ \"name\" : \"x\" , \"name\" : \"get_chunk\" ," +
			" \"arguments\" : { \"big\" : \"" + big + "\" } } }\n ",
		want: oversizedCall{ID: json.RawMessage(`2.5e1`), Tool: "get_chunk"},
	}, {
		name: "no arguments",
		msg:  `{"params":{"name":"list_files","pad":"` + big + `"},"method":"tools/call","id":0}`,
		want: oversizedCall{ID: json.RawMessage(`0`), Tool: "list_files"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var top struct {
				Params struct {
					Arguments json.RawMessage `json:"arguments"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(tt.msg), &top); err != nil {
				t.Fatalf("the test's message is not JSON: %v", err)
			}
			want := tt.want
			want.Size, want.ArgsSize = int64(len(tt.msg)), int64(len(top.Params.Arguments))
			if top.Params.Arguments == nil {
				want.ArgsSize = -1
			}
			// Whole, in chunks that split every token somewhere, and byte
			// by byte where the message is small enough.
			chunkings := [][]int{nil, {1 << 20}, {7, 64 << 10, 3, 1}, {4096}}
			for _, sizes := range chunkings {
				got, ok, err := scanAll([]byte(tt.msg), maxScannedMessage, sizes...)
				if !ok || err != nil {
					t.Fatalf("chunks %v: no call found (%v)", sizes, err)
				}
				if string(got.ID) != string(want.ID) || got.Tool != want.Tool || got.Conversation != want.Conversation ||
					string(got.Meta) != string(want.Meta) || got.Size != want.Size || got.ArgsSize != want.ArgsSize {
					t.Errorf("chunks %v: %+v\nwant %+v", sizes, clipCall(got), clipCall(want))
				}
			}
		})
	}
}

func clipCall(c oversizedCall) string {
	return fmt.Sprintf("id=%s tool=%q conv=%q meta=%s size=%d args=%d", c.ID, c.Tool, c.Conversation, c.Meta, c.Size, c.ArgsSize)
}

func TestMessageScanLeavesOthersAlone(t *testing.T) {
	call := func(id string) string { return tsCall(id, "web_search", `{"query":"q"}`) }
	deep := strings.Repeat("[", maxMessageDepth) + strings.Repeat("]", maxMessageDepth)
	tests := []struct {
		name, msg string
		err       error // nil: the scan reads it whole but it is no call to answer
	}{
		{"another method", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x","name":"web_search"}}`, nil},
		{"a notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"web_search"}}`, nil},
		{"id null", call("null"), nil},
		{"id an object", call(`{"a":1}`), nil},
		{"id true", call("true"), nil},
		{"id too long", call(`"` + strings.Repeat("x", maxScannedID) + `"`), nil},
		{"no tool name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, nil},
		{"tool name not a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, nil},
		{"positional params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["web_search"]}`, nil},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":["tools/call"],"params":{"name":"x"}}`, nil},
		{"a batch", "[" + call("1") + "]", errScanShape},
		{"a number", "42", errScanShape},
		{"cut short", strings.TrimSuffix(call("1"), "}"), nil},
		{"data after it", call("1") + "x", errScanSyntax},
		{"two messages", call("1") + call("2"), errScanSyntax},
		{"a control character", tsCall("1", "web_search", "{\"q\":\"a\nb\"}"), errScanSyntax},
		{"a bad escape", tsCall("1", "web_search", `{"q":"a\xb"}`), errScanSyntax},
		{"a short unicode escape", tsCall("1", "web_search", `{"q":"\u12g4"}`), errScanSyntax},
		{"a leading zero", tsCall("1", "web_search", `{"n":01}`), errScanSyntax},
		{"a bare dot", tsCall("1", "web_search", `{"n":1.}`), errScanSyntax},
		{"a bare minus", tsCall("1", "web_search", `{"n":-}`), errScanSyntax},
		{"an empty exponent", tsCall("1", "web_search", `{"n":1e+}`), errScanSyntax},
		{"a bad literal", tsCall("1", "web_search", `{"n":nul}`), errScanSyntax},
		{"a missing colon", tsCall("1", "web_search", `{"n" 1}`), errScanSyntax},
		{"a trailing comma", tsCall("1", "web_search", `{"n":1,}`), errScanSyntax},
		{"a key not a string", tsCall("1", "web_search", `{n:1}`), errScanSyntax},
		{"a missing comma", tsCall("1", "web_search", `{"a":[1 2]}`), errScanSyntax},
		{"too deep", tsCall("1", "web_search", `{"q":`+deep+`}`), errScanDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == errScanSyntax && json.Valid([]byte(tt.msg)) {
				t.Fatalf("the test's message is JSON")
			}
			for _, sizes := range [][]int{nil, {1}, {5, 2}} {
				c, ok, err := scanAll([]byte(tt.msg), maxScannedMessage, sizes...)
				if ok || err != tt.err {
					t.Errorf("chunks %v: call %v %s, error %v; want none, error %v", sizes, ok, clipCall(c), err, tt.err)
				}
			}
		})
	}
	// Past its bound the scan gives up, and says why.
	msg := tsCall("1", "web_search", `{"q":"`+strings.Repeat("a", 2<<20)+`"}`)
	if _, ok, err := scanAll([]byte(msg), 1<<20, 64<<10); ok || err != errScanTooLarge {
		t.Errorf("a message over the scan's bound: call %v, error %v; want errScanTooLarge", ok, err)
	}
}

// FuzzMessageScan checks the scan against encoding/json: it accepts only
// JSON, finds what a decoder finds, and does not depend on how the bytes
// are cut.
func FuzzMessageScan(f *testing.F) {
	for _, s := range []string{
		tsCall("1", "web_search", `{"query":"x"}`),
		tsCall(`"a\"b"`, "add_document", `{"conversation_id":"c","content_base64":"QUJD","file_name":"f"}`),
		`{"id":1,"method":"tools/call","params":{"name":"n","_meta":{"progressToken":"p"},"arguments":{"a":[1,{"b":null}]}}}`,
		`{"\u0069d":1e5,"method":"tools\/call","params":{"name":"\u00e9"}}`,
		`{"id":1,"method":"tools/call","params":{"name":"x","arguments":{"q":"\ud83d\ude00"}}} `,
		`[1,2]`, `{"id":01}`, `{"a":"\u00"}`, `{}`, ``,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, msg []byte, chunk uint8) {
		whole, okWhole, errWhole := scanAll(msg, maxScannedMessage)
		cut, okCut, errCut := scanAll(msg, maxScannedMessage, int(chunk)+1)
		if okWhole != okCut || errWhole != errCut || clipCall(whole) != clipCall(cut) {
			t.Fatalf("whole: %v %v %s; in chunks of %d: %v %v %s", okWhole, errWhole, clipCall(whole), int(chunk)+1, okCut, errCut, clipCall(cut))
		}
		valid := json.Valid(msg)
		if errWhole == errScanSyntax && valid {
			t.Fatalf("JSON refused as a syntax error: %q", msg)
		}
		if !okWhole {
			return
		}
		if !valid {
			t.Fatalf("a call found in what is not JSON: %q", msg)
		}
		var top map[string]json.RawMessage
		var params map[string]json.RawMessage
		var method, name string
		if json.Unmarshal(msg, &top) != nil || json.Unmarshal(top["params"], &params) != nil ||
			json.Unmarshal(top["method"], &method) != nil || json.Unmarshal(params["name"], &name) != nil {
			t.Fatalf("the scan found a call the decoder does not: %q", msg)
		}
		if method != "tools/call" || name != whole.Tool || string(top["id"]) != string(whole.ID) {
			t.Fatalf("scan %s, decoder method %q id %s name %q", clipCall(whole), method, top["id"], name)
		}
		if a, ok := params["arguments"]; ok && int64(len(a)) != whole.ArgsSize || !ok && whole.ArgsSize != -1 {
			t.Fatalf("arguments of %d bytes, scan says %d", len(a), whole.ArgsSize)
		}
		if m, ok := params["_meta"]; ok && len(m) <= maxScannedMeta && string(m) != string(whole.Meta) {
			t.Fatalf("_meta %s, scan says %s", m, whole.Meta)
		}
	})
}

// TestStandInCall: the stand-in keeps the id, tool, conversation and _meta,
// carries a note in place of the arguments and a mark that only this
// process makes.
func TestStandInCall(t *testing.T) {
	c := oversizedCall{ID: json.RawMessage(`"big-1"`), Tool: "add_document", Conversation: "c1",
		Meta: json.RawMessage(`{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`), Size: 9_700_000, ArgsSize: 9_699_000}
	msg, err := c.message()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID     json.RawMessage
		Method string
		Params mcp.CallToolParamsRaw
	}
	if err := json.Unmarshal(msg, &got); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	var args map[string]string
	_ = json.Unmarshal(got.Params.Arguments, &args)
	meta := got.Params.GetMeta()
	if string(got.ID) != `"big-1"` || got.Method != "tools/call" || got.Params.Name != "add_document" || args["conversation_id"] != "c1" ||
		meta["progressToken"] != float64(7) || meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" {
		t.Errorf("stand-in %s", msg)
	}
	if want := "arguments of 9.2 MB not kept: the message was over the 4 MB limit"; args[oversizeNoteKey] != want {
		t.Errorf("note %q, want %q", args[oversizeNoteKey], want)
	}
	if size, ok := oversizedMark(&got.Params); !ok || size != c.Size {
		t.Errorf("mark: size %d %v, want %d", size, ok, c.Size)
	}
	forged := []string{"", "1:1", "9700000:9699000:" + strings.Repeat("0", 32), meta[oversizeMeta].(string) + "0"}
	for _, mark := range forged {
		p := got.Params
		p.Meta = mcp.Meta{oversizeMeta: mark}
		if _, ok := oversizedMark(&p); ok {
			t.Errorf("the mark %q was taken", mark)
		}
	}
	// The mark is bound to the tool: it cannot be moved to another call.
	p := got.Params
	p.Name = "web_search"
	if _, ok := oversizedMark(&p); ok {
		t.Errorf("a mark made for add_document was taken for web_search")
	}
}

func TestOversizeErrorWording(t *testing.T) {
	add := oversizeError("add_document", 6<<20)
	other := oversizeError("search_docs", 6<<20)
	for _, te := range []*ToolError{add, other} {
		if te.Code != CodeToolError || te.Status != 413 || te.Retryable || !strings.Contains(te.Message, "larger than 4 MB (6.0 MB)") {
			t.Errorf("%+v, want a TOOL_ERROR 413 saying the message is larger than 4 MB", te)
		}
	}
	for _, want := range []string{"upload API", "POST /v1/conversations/{id}/files", "multipart/form-data", "url", "content_base64", "about 3 MB"} {
		if !strings.Contains(add.Message, want) {
			t.Errorf("add_document's message %q does not say %q", add.Message, want)
		}
	}
	if strings.Contains(other.Message, "upload") {
		t.Errorf("search_docs's message names the upload API: %q", other.Message)
	}
}

// BenchmarkMessageScan measures the scan of a 5 MB add_document call:
// go test -run '^$' -bench MessageScan ./server/
func BenchmarkMessageScan(b *testing.B) {
	msg := []byte(tsCall("1", "add_document", `{"conversation_id":"c","file_name":"a.pdf","content_base64":"`+
		strings.Repeat("QUJD", 5<<20/4)+`"}`))
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if _, ok, _ := scanAll(msg, maxScannedMessage, 32<<10); !ok {
			b.Fatal("no call")
		}
	}
}

// randomChunks cuts n bytes into pieces of 1 to max bytes.
func randomChunks(r *rand.Rand, max int) []int {
	sizes := make([]int, 64)
	for i := range sizes {
		sizes[i] = 1 + r.IntN(max)
	}
	return sizes
}

func TestMessageScanRandomCuts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	msg := []byte(tsCall(`"x\u0041"`, "add_document", `{"conversation_id":"c\"1","content_base64":"`+strings.Repeat("QUJD", 1<<16)+`","n":[1.5e3,-0,{"a":null}]}`))
	want, ok, _ := scanAll(msg, maxScannedMessage)
	if !ok {
		t.Fatal("no call")
	}
	for range 200 {
		sizes := randomChunks(r, 40)
		got, ok, err := scanAll(msg, maxScannedMessage, sizes...)
		if !ok || clipCall(got) != clipCall(want) || !bytes.Equal(got.ID, []byte(`"x\u0041"`)) {
			t.Fatalf("chunks %v: %v %v %s, want %s", sizes, ok, err, clipCall(got), clipCall(want))
		}
	}
}
