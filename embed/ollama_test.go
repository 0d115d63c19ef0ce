package embed

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func newTestOllama(t *testing.T, srv *fakeServer, cfg OllamaConfig) (*Ollama, *sleepRecorder) {
	t.Helper()
	cfg.BaseURL = srv.URL
	if cfg.Model == "" {
		cfg.Model = "nomic-embed-text"
	}
	o, err := NewOllama(cfg)
	if err != nil {
		t.Fatalf("NewOllama: %v", err)
	}
	rec := &sleepRecorder{}
	o.r.http.sleep = rec.sleep
	return o, rec
}

func TestOllamaRequestShape(t *testing.T) {
	tests := []struct {
		name          string
		cfg           OllamaConfig
		wantKeepAlive string // raw JSON, "" for absent
		wantAuth      string
	}{
		{name: "plain", cfg: OllamaConfig{Dimensions: 4}},
		{name: "keep alive duration", cfg: OllamaConfig{Dimensions: 4, KeepAlive: "10m"}, wantKeepAlive: `"10m"`},
		{name: "keep alive seconds", cfg: OllamaConfig{Dimensions: 4, KeepAlive: "-1"}, wantKeepAlive: `-1`},
		{name: "behind a proxy", cfg: OllamaConfig{Dimensions: 4, APIKey: "tok"}, wantAuth: "Bearer tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, ollamaAnswer(t, 4))
			o, _ := newTestOllama(t, srv, tt.cfg)
			vecs, err := o.Embed(context.Background(), textsN(3))
			if err != nil {
				t.Fatal(err)
			}
			checkOrder(t, vecs, 3, 4)
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodPost || r.Path != "/api/embed" {
				t.Errorf("request %s %s, want POST /api/embed", r.Method, r.Path)
			}
			if got := r.Header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tt.wantAuth)
			}
			var model string
			_ = json.Unmarshal(r.Body["model"], &model)
			if model != "nomic-embed-text" {
				t.Errorf("model %q", model)
			}
			if got := string(r.Body["keep_alive"]); got != tt.wantKeepAlive {
				t.Errorf("keep_alive %s, want %s", got, tt.wantKeepAlive)
			}
			for _, k := range []string{"encoding_format", "dimensions"} {
				if _, ok := r.Body[k]; ok {
					t.Errorf("unexpected field %q", k)
				}
			}
		})
	}
}

func TestOllamaBatchingAndRetry(t *testing.T) {
	srv := newFakeServer(t, ollamaAnswer(t, 3),
		fakeReply{},
		fakeReply{Status: http.StatusServiceUnavailable, Header: map[string]string{"Retry-After": "1"}, Body: `{"error":"server busy, please try again. maximum pending requests exceeded"}`},
	)
	o, rec := newTestOllama(t, srv, OllamaConfig{BatchSize: 4})
	vecs, err := o.Embed(context.Background(), textsN(10))
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, vecs, 10, 3)
	var sizes []int
	for _, r := range srv.requests() {
		sizes = append(sizes, len(r.Input))
	}
	if mustJSON(t, sizes) != "[4,4,4,2]" {
		t.Errorf("request sizes %v, want [4 4 4 2] (second batch retried)", sizes)
	}
	if w := rec.recorded(); len(w) != 1 || w[0] < time.Second {
		t.Errorf("waits %v, want one of at least 1s", w)
	}
	if d := o.Dimensions(); d != 3 {
		t.Errorf("Dimensions() = %d, want 3 learnt from the answers", d)
	}
}

func TestOllamaErrors(t *testing.T) {
	tests := []struct {
		name    string
		reply   fakeReply
		dims    int
		wantErr error
		wantMsg string
	}{
		{
			name:    "model not pulled",
			reply:   fakeReply{Status: http.StatusNotFound, Body: `{"error":"model \"nomic-embed-text\" not found, try pulling it first"}`},
			wantErr: ErrRejected,
			wantMsg: `model "nomic-embed-text" not found, try pulling it first`,
		},
		{
			name:    "input too long",
			reply:   fakeReply{Status: http.StatusBadRequest, Body: `{"error":"the input length exceeds the context length"}`},
			wantErr: ErrRejected,
			wantMsg: "exceeds the context length",
		},
		{
			name:    "count mismatch",
			reply:   fakeReply{Status: http.StatusOK, Body: `{"model":"nomic-embed-text","embeddings":[[1,2,3]]}`},
			wantErr: ErrBadResponse,
			wantMsg: "got 1 embeddings for 2 inputs",
		},
		{
			name:    "wrong dimensions",
			reply:   fakeReply{Status: http.StatusOK, Body: `{"model":"nomic-embed-text","embeddings":[[1,2,3],[1,2,3]]}`},
			dims:    768,
			wantErr: ErrBadResponse,
			wantMsg: "has 3 dimensions, want 768",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, func(fakeRequest) fakeReply { return tt.reply })
			o, rec := newTestOllama(t, srv, OllamaConfig{Dimensions: tt.dims})
			_, err := o.Embed(context.Background(), textsN(2))
			if !errors.Is(err, tt.wantErr) || Retryable(err) {
				t.Fatalf("error = %v, want non-retryable %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if n := len(srv.requests()); n != 1 || len(rec.recorded()) != 0 {
				t.Errorf("%d requests, %d waits; want 1 and 0", n, len(rec.recorded()))
			}
		})
	}
}

func TestOllamaModelName(t *testing.T) {
	tests := []struct{ model, want string }{
		{"nomic-embed-text", "ollama:nomic-embed-text:latest"},
		{"nomic-embed-text:latest", "ollama:nomic-embed-text:latest"},
		{"mxbai-embed-large:335m", "ollama:mxbai-embed-large:335m"},
		{"hf.co/CompendiumLabs/bge-base-en-v1.5-gguf", "ollama:hf.co/CompendiumLabs/bge-base-en-v1.5-gguf:latest"},
		{"localhost:5000/team/embedder", "ollama:localhost:5000/team/embedder:latest"},
	}
	for _, tt := range tests {
		o, err := NewOllama(OllamaConfig{Model: tt.model})
		if err != nil {
			t.Fatalf("NewOllama(%q): %v", tt.model, err)
		}
		if o.Model() != tt.want {
			t.Errorf("Model() for %q = %q, want %q", tt.model, o.Model(), tt.want)
		}
	}
}

func TestNewOllamaConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  OllamaConfig
		want string
	}{
		{"missing model", OllamaConfig{}, "model is required"},
		{"bad keep alive", OllamaConfig{Model: "m", KeepAlive: "forever"}, "keep-alive"},
		{"bad URL", OllamaConfig{Model: "m", BaseURL: "ftp://host"}, "base URL"},
		{"negative dimensions", OllamaConfig{Model: "m", Dimensions: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOllama(tt.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrConfig mentioning %q", err, tt.want)
			}
		})
	}
}
