package searxng

import (
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

func TestDecodeResponse(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    *Response
		wantErr string
	}{
		{name: "empty object", body: ` {} `, want: &Response{}},
		{name: "empty body", body: "  ", wantErr: "empty body"},
		{name: "null", body: "null", wantErr: "not a JSON object"},
		{name: "array", body: `[{"url":"x"}]`, wantErr: "not a JSON object"},
		{name: "html", body: "<!DOCTYPE html><html></html>", wantErr: "not a JSON object"},
		{name: "truncated", body: `{"results": [{"url": "https://a"`, wantErr: "unexpected end"},
		{
			name: "optional and odd result fields",
			body: `{"query": "q", "number_of_results": 0, "results": [
				{"url": "https://a", "title": "A", "content": "c", "engine": "bing", "engines": ["bing", "google"],
				 "score": 2.5, "category": "general", "publishedDate": "2025-01-02T03:04:05", "positions": [1], "extra": {"k": 1}},
				{"url": "https://b", "title": 42, "publishedDate": null, "engine": "brave", "score": "1.25"},
				{"url": "https://c", "engines": ["wikipedia"], "content": null, "score": null, "publishedDate": 1700000000},
				{"title": "no url"},
				"not an object",
				{"url": "https://d", "engines": "qwant", "score": "n/a", "category": ["x"]}
			]}`,
			want: &Response{Query: "q", Results: []Result{
				{URL: "https://a", Title: "A", Content: "c", Engine: "bing", Engines: []string{"bing", "google"}, Score: 2.5, Category: "general", PublishedDate: "2025-01-02T03:04:05"},
				{URL: "https://b", Title: "42", Engine: "brave", Engines: []string{"brave"}, Score: 1.25},
				{URL: "https://c", Engine: "wikipedia", Engines: []string{"wikipedia"}, PublishedDate: "1700000000"},
				{URL: "https://d", Engine: "qwant", Engines: []string{"qwant"}},
			}},
		},
		{
			name: "answers old and new",
			body: `{"answers": ["42", {"answer": "6 * 7", "url": "https://calc", "engine": "calculator", "template": "x"}, {"url": "no answer"}, null]}`,
			want: &Response{Answers: []Answer{{Answer: "42"}, {Answer: "6 * 7", URL: "https://calc", Engine: "calculator"}}},
		},
		{
			name: "strings lists",
			body: `{"corrections": ["go lang", "", 7, {"x": 1}], "suggestions": "single"}`,
			want: &Response{Corrections: []string{"go lang", "7"}, Suggestions: []string{"single"}},
		},
		{
			name: "infoboxes",
			body: `{"infoboxes": [
				{"infobox": "Go", "id": "https://go.dev", "content": "A language", "engine": "wikipedia",
				 "urls": [{"title": "Site", "url": "https://go.dev"}, {"title": "no url"}, "bad"],
				 "attributes": [{"label": "Designed by", "value": "Griesemer"}, {"label": "Logo", "image": {"src": "x"}}, {"value": 2009}, {}]},
				"bad", {"infobox": "Bare"}]}`,
			want: &Response{Infoboxes: []Infobox{
				{Infobox: "Go", ID: "https://go.dev", Content: "A language", Engine: "wikipedia",
					URLs:       []Link{{Title: "Site", URL: "https://go.dev"}},
					Attributes: []Attribute{{Label: "Designed by", Value: "Griesemer"}, {Label: "Logo"}, {Value: "2009"}}},
				{Infobox: "Bare"},
			}},
		},
		{
			name: "unresponsive engines in every shape",
			body: `{"unresponsive_engines": [["wikidata", "timeout"], ["google", "CAPTCHA", true], ["solo"], [],
				{"engine": "bing", "reason": "HTTP error"}, {"name": "brave", "error": "Suspended"}, "qwant", null]}`,
			want: &Response{UnresponsiveEngines: []UnresponsiveEngine{
				{"wikidata", "timeout"}, {"google", "CAPTCHA"}, {"solo", ""},
				{"bing", "HTTP error"}, {"brave", "Suspended"}, {"qwant", ""},
			}},
		},
		{
			name: "fields of the wrong type",
			body: `{"query": ["x"], "results": {"url": "x"}, "answers": "a", "infoboxes": null, "unresponsive_engines": 3}`,
			want: &Response{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeResponse([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decodeResponse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestErrorDetail(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{`{"error": "No query"}`, "No query"},
		{`{"error": {"code": 5}}`, `{"code":5}`},
		{"<html><head><TITLE>502 Bad Gateway</TITLE></head></html>", "502 Bad Gateway"},
		{"Too Many\n  Requests\n", "Too Many Requests"},
		{strings.Repeat("é", 1000), strings.Repeat("é", excerptRunes) + "…"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := errorDetail([]byte(tt.body)); got != tt.want {
			t.Errorf("errorDetail(%.30q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func FuzzDecodeResponse(f *testing.F) {
	f.Add([]byte(`{"results": [{"url": "https://a", "engines": ["x"], "score": "1"}], "unresponsive_engines": [["a","b"]]}`))
	f.Add([]byte(`{"answers": ["x", {"answer": 1}], "infoboxes": [{"urls": [{"url": 2}], "attributes": [{"value": null}]}]}`))
	f.Add([]byte(`{"suggestions": "s", "corrections": [[]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := decodeResponse(body)
		if err != nil {
			return
		}
		for _, r := range resp.Results {
			if r.URL == "" {
				t.Errorf("result without URL kept: %+v", r)
			}
			if (r.Engine == "") != (len(r.Engines) == 0) {
				t.Errorf("Engine %q and Engines %q disagree", r.Engine, r.Engines)
			}
		}
		for _, u := range resp.UnresponsiveEngines {
			if u.Engine == "" {
				t.Errorf("unresponsive engine without a name: %+v", u)
			}
		}
	})
}

// BenchmarkDecodeResponse measures decoding one page of the fake's answer,
// without HTTP.
func BenchmarkDecodeResponse(b *testing.B) {
	fake := searxngtest.New(b)
	resp, err := http.Get(fake.URL + "/search?q=benchmark+query&format=json")
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}
