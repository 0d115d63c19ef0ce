package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"clean", `{"q":"caf\u00e9 \ud83d\ude00","n":[1,-2.5e3,null,true]}`, `{"q":"caf\u00e9 \ud83d\ude00","n":[1,-2.5e3,null,true]}`, false},
		{"NUL escape in a value", `{"conversation_id":"a\u0000b"}`, `{"conversation_id":"a\ufffdb"}`, true},
		{"NUL escape in a key", `{"a\u0000":1}`, `{"a\ufffd":1}`, true},
		{"escaped backslash before u0000", `{"q":"\\u0000"}`, `{"q":"\\u0000"}`, false},
		{"lone high surrogate", `["\ud800x"]`, `["\ufffdx"]`, true},
		{"lone low surrogate", `["\udc00"]`, `["\ufffd"]`, true},
		{"high surrogate then non-surrogate escape", `["\ud800\u0041"]`, `["\ufffd\u0041"]`, true},
		{"invalid UTF-8 byte", "[\"a\xffb\"]", "[\"a\uFFFDb\"]", true},
		{"number beyond numeric", `{"n":1e1000000}`, `{"n":"1e1000000"}`, true},
		{"tiny number beyond numeric", `[1E-20000]`, `["1E-20000"]`, true},
		{"ordinary exponent", `[1e300,1E-300]`, `[1e300,1E-300]`, false},
		{"not JSON", "a\x00b", `{"unparsed":"a\ufffdb"}`, true},
		{"empty", ``, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := CleanJSON(json.RawMessage(tt.in))
			if string(got) != tt.want || changed != tt.changed {
				t.Errorf("CleanJSON(%q) = %q, %v; want %q, %v", tt.in, got, changed, tt.want, tt.changed)
			}
			if len(got) > 0 && !json.Valid(got) {
				t.Errorf("CleanJSON(%q) is not JSON: %q", tt.in, got)
			}
		})
	}
}

func TestCleanText(t *testing.T) {
	tests := []struct {
		in      string
		max     int
		want    string
		changed bool
	}{
		{"plain", 10, "plain", false},
		{"a\x00b", 10, "a\uFFFDb", true},
		{"a\xc3(b", 10, "a\uFFFD(b", true},
		{"ééé", 5, "éé", true},
		{"", 5, "", false},
	}
	for _, tt := range tests {
		got, changed := cleanText(tt.in, tt.max)
		if got != tt.want || changed != tt.changed {
			t.Errorf("cleanText(%q, %d) = %q, %v; want %q, %v", tt.in, tt.max, got, changed, tt.want, tt.changed)
		}
	}
}

func TestSanitiseNamesChangedColumns(t *testing.T) {
	e := sanitise(Entry{
		ConversationID: "a\x00b",
		ToolName:       strings.Repeat("t", 150),
		Arguments:      json.RawMessage(`{"query":"x\u0000"}`),
		Result:         json.RawMessage(`{"ok":true}`),
		Error:          "bad \xff byte",
		LatencyMS:      1 << 40,
		ClientName:     strings.Repeat("é", 4000),
	}, 1<<16, 1<<14)
	want := []string{"conversation_id", "tool_name", "arguments", "error", "latency_ms", "client_name"}
	if strings.Join(e.Sanitised, ",") != strings.Join(want, ",") {
		t.Errorf("Sanitised = %v, want %v", e.Sanitised, want)
	}
	if utf8.RuneCountInString(e.ToolName) != maxToolNameRunes || len(e.ClientName) > maxIdentBytes || !utf8.ValidString(e.ClientName) {
		t.Errorf("long values not cut: tool %d runes, client %d bytes", utf8.RuneCountInString(e.ToolName), len(e.ClientName))
	}
	if clean := sanitise(Entry{ToolName: "web_search", Arguments: json.RawMessage(`{"q":"x"}`)}, 1<<16, 1<<14); clean.Sanitised != nil {
		t.Errorf("a clean entry was marked sanitised: %v", clean.Sanitised)
	}
}

// FuzzCleanJSON checks that the cleaned JSON is valid, holds no escape
// jsonb refuses, and that clean input is kept byte for byte.
func FuzzCleanJSON(f *testing.F) {
	f.Add([]byte(`{"a":"\u0000\ud800\udc00\ud800","b":[1e99999]}`))
	f.Add([]byte("\"\xff\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, changed := CleanJSON(data)
		if len(data) == 0 {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("CleanJSON(%q) = %q is not JSON", data, got)
		}
		if !utf8.Valid(got) || strings.Contains(string(got), `\u0000`) && !strings.Contains(string(got), `\\u0000`) {
			t.Fatalf("CleanJSON(%q) = %q still holds what jsonb refuses", data, got)
		}
		if !changed && string(got) != string(data) {
			t.Fatalf("CleanJSON(%q) changed the input without saying so: %q", data, got)
		}
	})
}
