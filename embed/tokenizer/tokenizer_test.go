package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readFixture returns a file of testdata, gunzipped when its name ends in .gz.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(name, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

type goldenCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

// TestGolden compares the ids of every text with those Hugging Face's
// tokenizers library gave for the same tokenizer.json (tools/tokref/gen.js).
func TestGolden(t *testing.T) {
	tests := []struct {
		name, file string
		vocab      int
	}{
		{name: "bert-uncased", file: "bert-uncased.tokenizer.json.gz", vocab: 29528},
		// The catalogued models' files: potion-base-8M's as published
		// (embed/model2vec checks its SHA-256 against the catalogue's),
		// and one shaped like potion-retrieval-32M's, with padding and
		// truncation set.
		{name: "potion-base-8M", file: "potion-base-8M.tokenizer.json.gz", vocab: 29528},
		{name: "potion-retrieval-32M-shape", file: "potion-retrieval-32M-shape.tokenizer.json.gz", vocab: 33528},
		{name: "small-cased", file: "small-cased.tokenizer.json"},
		{name: "small-strip", file: "small-strip.tokenizer.json"},
		{name: "small-lower", file: "small-lower.tokenizer.json"},
		// The other normalisers and pre-tokenisers, every option.
		{name: "small-sequence", file: "small-sequence.tokenizer.json"},
		{name: "small-whitespace", file: "small-whitespace.tokenizer.json"},
		{name: "small-metaspace", file: "small-metaspace.tokenizer.json"},
		{name: "small-metaspace-nosplit", file: "small-metaspace-nosplit.tokenizer.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := Parse(readFixture(t, tt.file))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.vocab != 0 && tok.VocabSize() != tt.vocab {
				t.Errorf("VocabSize() = %d, want %d", tok.VocabSize(), tt.vocab)
			}
			var cases []goldenCase
			if err := json.Unmarshal(readFixture(t, tt.name+".golden.json"), &cases); err != nil {
				t.Fatal(err)
			}
			if len(cases) < 400 {
				t.Fatalf("only %d golden cases", len(cases))
			}
			failed := 0
			for _, c := range cases {
				got := tok.Encode(nil, c.Text)
				if !slices.Equal(got, c.IDs) && !(len(got) == 0 && len(c.IDs) == 0) {
					failed++
					if failed <= 10 {
						t.Errorf("Encode(%+q)\n got %v %q\nwant %v %q", c.Text, got, tok.tokens(got), c.IDs, tok.tokens(c.IDs))
					}
				}
			}
			if failed > 0 {
				t.Errorf("%d of %d texts differ", failed, len(cases))
			}
		})
	}
}

func (t *Tokenizer) tokens(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.Token(int(id))
	}
	return out
}

// TestEncodeAppends checks that Encode appends to dst and leaves its
// contents alone, truncation included.
func TestEncodeAppends(t *testing.T) {
	tok, err := Parse(readFixture(t, "small-lower.tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := []int32{-1, -2}
	text := strings.Repeat("hello world the cat sat on the mat ", 4)
	alone := tok.Encode(nil, text)
	got := tok.Encode(slices.Clone(prefix), text)
	if !slices.Equal(got[:2], prefix) || !slices.Equal(got[2:], alone) {
		t.Errorf("Encode(prefix) = %v, want %v then %v", got, prefix, alone)
	}
	if len(alone) != 20 {
		t.Errorf("truncated to %d ids, want 20", len(alone))
	}
}

// TestRefused checks that what the package does not implement is refused
// with an error that names it, and malformed files with ErrInvalid.
func TestRefused(t *testing.T) {
	base := readFixture(t, "small-cased.tokenizer.json")
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	model := func(m map[string]any) map[string]any { return m["model"].(map[string]any) }
	tests := []struct {
		name    string
		data    []byte
		wantErr error
		wantMsg string
	}{
		{"BPE model", edit(func(m map[string]any) { model(m)["type"] = "BPE" }), ErrUnsupported, `tokenizer model "BPE" (only WordPiece is supported)`},
		{"Unigram model", edit(func(m map[string]any) { model(m)["type"] = "Unigram" }), ErrUnsupported, `"Unigram"`},
		{"NFKC normalizer", edit(func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }), ErrUnsupported, `normalizer "NFKC" (supported: BertNormalizer,`},
		{"NFD in a sequence", edit(func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Lowercase"}, map[string]any{"type": "NFD"}}}
		}), ErrUnsupported, `normalizer "NFD"`},
		{"precompiled normalizer", edit(func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Precompiled", "precompiled_charsmap": "AAAA"}
		}), ErrUnsupported, `normalizer "Precompiled"`},
		{"replace of a regex", edit(func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": `\s+`}, "content": " "}
		}), ErrUnsupported, "normalizer Replace of a regular expression"},
		{"replace of nothing", edit(func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": ""}, "content": "x"}
		}), ErrUnsupported, "normalizer Replace of an empty string"},
		{"byte-level pre-tokenizer", edit(func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "ByteLevel"} }), ErrUnsupported, `pre-tokenizer "ByteLevel" (supported: BertPreTokenizer,`},
		{"split on a regex", edit(func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\d+`}, "behavior": "Isolated"}}}
		}), ErrUnsupported, "pre-tokenizer Split on a regular expression"},
		{"metaspace replacement", edit(func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "__"} }), ErrInvalid, "not one character"},
		{"split behavior", edit(func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Punctuation", "behavior": "Sideways"}
		}), ErrInvalid, `behavior "Sideways"`},
		{"truncation direction", edit(func(m map[string]any) {
			m["truncation"] = map[string]any{"max_length": 3, "direction": "Middle"}
		}), ErrUnsupported, `direction "Middle"`},
		{"truncation of pairs", edit(func(m map[string]any) {
			m["truncation"] = map[string]any{"max_length": 3, "direction": "Right", "strategy": "OnlySecond"}
		}), ErrUnsupported, "strategy OnlySecond"},
		{"no model", edit(func(m map[string]any) { delete(m, "model") }), ErrInvalid, "no model"},
		{"unknown token missing", edit(func(m map[string]any) { model(m)["unk_token"] = "<nope>" }), ErrInvalid, `"<nope>" is not in the vocabulary`},
		{"ids with a gap", edit(func(m map[string]any) { model(m)["vocab"].(map[string]any)["zzz"] = 5000 }), ErrInvalid, "not dense"},
		{"added token clash", edit(func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"id": 0, "content": "cat"}}
		}), ErrInvalid, `added token "cat" has id 0`},
		{"not JSON", []byte("{"), ErrInvalid, "tokenizer.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Parse: %v, want %v mentioning %q", err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

// TestIgnored checks that padding, the post-processor and the decoder,
// whatever they say, change no id: they are accepted and ignored.
func TestIgnored(t *testing.T) {
	base := readFixture(t, "small-cased.tokenizer.json")
	plain, err := Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "The cat sat on the mat.", "[CLS] New York <mask> cat", strings.Repeat("hello world ", 40)}
	tests := map[string]map[string]any{
		"padding to the longest": {"padding": map[string]any{"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": 8, "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}},
		"padding to a length":    {"padding": map[string]any{"strategy": map[string]any{"Fixed": 512}, "direction": "Left", "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}},
		"BERT post-processor":    {"post_processor": map[string]any{"type": "BertProcessing", "sep": []any{"[SEP]", 4}, "cls": []any{"[CLS]", 3}}},
		"template post-processor": {"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "[CLS]", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair":           []any{map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{"[CLS]": map[string]any{"id": "[CLS]", "ids": []any{3}, "tokens": []any{"[CLS]"}}}}},
		"no decoder": {"decoder": nil},
	}
	for name, fields := range tests {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(base, &m); err != nil {
				t.Fatal(err)
			}
			for k, v := range fields {
				m[k] = v
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			for _, text := range texts {
				if got, want := tok.Encode(nil, text), plain.Encode(nil, text); !slices.Equal(got, want) {
					t.Errorf("Encode(%q) = %v, want %v", text, got, want)
				}
			}
		})
	}
}

// TestLoadNamesFile checks that a file refused says, on one line, which
// file and what part of it.
func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, []byte(`{"normalizer":{"type":"NFKC"},"model":{"type":"WordPiece","vocab":{"[UNK]":0}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if !errors.Is(err, ErrUnsupported) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), `normalizer "NFKC"`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Load = %v, want one line naming %s and the NFKC normalizer", err, path)
	}
}

// TestInvalidUTF8 checks that bytes that are not UTF-8 are treated as
// U+FFFD, which the BERT normaliser drops, rather than breaking words apart
// at random.
func TestInvalidUTF8(t *testing.T) {
	tok, err := Parse(readFixture(t, "bert-uncased.tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	got := tok.Encode(nil, "hello \xff\xfeworld")
	want := tok.Encode(nil, "hello world")
	if !slices.Equal(got, want) {
		t.Errorf("Encode(invalid) = %v, want %v", got, want)
	}
}

func FuzzEncode(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("testdata", "small-cased.tokenizer.json"))
	if err != nil {
		f.Fatal(err)
	}
	tok, err := Parse(data)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"", "New York <mask> cat", "\xff", "İß東京😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range tok.Encode(nil, s) {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}

// FuzzParse checks that no tokenizer.json, however malformed, panics Parse
// or the encoder of a tokenizer it accepts.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"small-cased.tokenizer.json", "small-strip.tokenizer.json", "small-sequence.tokenizer.json",
		"small-whitespace.tokenizer.json", "small-metaspace.tokenizer.json", "small-metaspace-nosplit.tokenizer.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model":{"type":"WordPiece","vocab":{"[UNK]":0},"max_input_chars_per_word":-1},"added_tokens":[{"id":1,"content":" "}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data)
		if err != nil {
			return
		}
		for _, id := range tok.Encode(nil, "New York <mask> cat İß東京 café [CLS]") {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}
