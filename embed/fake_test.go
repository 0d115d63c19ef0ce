package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeRequest is what a fake provider saw of one request.
type fakeRequest struct {
	Method string
	Path   string
	Header http.Header
	Body   map[string]json.RawMessage
	Input  []string
}

// fakeReply is one scripted answer. A zero Status means "answer normally";
// Hang means "answer nothing until the client gives up".
type fakeReply struct {
	Hang   bool
	Status int
	Header map[string]string
	Body   string
}

// fakeServer is an httptest server that records requests and answers each
// with the next scripted reply, or with answer once the script is used up.
type fakeServer struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []fakeRequest
	script []fakeReply
	answer func(req fakeRequest) fakeReply
}

func newFakeServer(t *testing.T, answer func(req fakeRequest) fakeReply, script ...fakeReply) *fakeServer {
	t.Helper()
	f := &fakeServer{script: script, answer: answer}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := fakeRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone()}
		if err := json.Unmarshal(raw, &req.Body); err != nil {
			http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := json.Unmarshal(req.Body["input"], &req.Input); err != nil {
			http.Error(w, "input: "+err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		var reply fakeReply
		scripted := len(f.script) > 0
		if scripted {
			reply, f.script = f.script[0], f.script[1:]
		}
		f.mu.Unlock()
		if reply.Hang {
			<-r.Context().Done()
			return
		}
		if !scripted || reply.Status == 0 {
			reply = f.answer(req)
		}
		for k, v := range reply.Header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		if reply.Status == 0 {
			reply.Status = http.StatusOK
		}
		w.WriteHeader(reply.Status)
		_, _ = io.WriteString(w, reply.Body)
	}))
	t.Cleanup(f.Close)
	return f
}

// waitRequests blocks until the server has seen n requests.
func (f *fakeServer) waitRequests(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(f.requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("server saw %d requests, want %d", len(f.requests()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *fakeServer) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.reqs...)
}

// fakeVector is the vector a fake returns for text: its first component is
// the number in the text ("t17" -> 17) so tests can check order, the rest
// are filled deterministically.
func fakeVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	n, _ := strconv.Atoi(strings.TrimLeft(text, "t"))
	v[0] = float32(n)
	for i := 1; i < dims; i++ {
		v[i] = float32(len(text)+i) / 100
	}
	return v
}

func textsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("t%d", i)
	}
	return out
}

// checkOrder verifies that vecs[i] is the fake vector of "t<i>".
func checkOrder(t *testing.T, vecs [][]float32, n, dims int) {
	t.Helper()
	if len(vecs) != n {
		t.Fatalf("got %d vectors, want %d", len(vecs), n)
	}
	for i, v := range vecs {
		if len(v) != dims {
			t.Fatalf("vector %d has %d dimensions, want %d", i, len(v), dims)
		}
		if v[0] != float32(i) {
			t.Fatalf("vector %d belongs to text %v", i, v[0])
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openAIAnswer answers like the OpenAI API with vectors of dims.
func openAIAnswer(t *testing.T, dims int) func(fakeRequest) fakeReply {
	return func(req fakeRequest) fakeReply {
		type item struct {
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
			Index     int       `json:"index"`
		}
		var model string
		_ = json.Unmarshal(req.Body["model"], &model)
		resp := struct {
			Object string         `json:"object"`
			Data   []item         `json:"data"`
			Model  string         `json:"model"`
			Usage  map[string]int `json:"usage"`
		}{Object: "list", Model: model, Usage: map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)}}
		for i, text := range req.Input {
			resp.Data = append(resp.Data, item{Object: "embedding", Embedding: fakeVector(text, dims), Index: i})
		}
		return fakeReply{Body: mustJSON(t, resp)}
	}
}

// ollamaAnswer answers like Ollama's /api/embed with vectors of dims.
func ollamaAnswer(t *testing.T, dims int) func(fakeRequest) fakeReply {
	return func(req fakeRequest) fakeReply {
		var model string
		_ = json.Unmarshal(req.Body["model"], &model)
		resp := struct {
			Model           string      `json:"model"`
			Embeddings      [][]float32 `json:"embeddings"`
			TotalDuration   int64       `json:"total_duration"`
			LoadDuration    int64       `json:"load_duration"`
			PromptEvalCount int         `json:"prompt_eval_count"`
		}{Model: model, TotalDuration: 14143917, LoadDuration: 1019500, PromptEvalCount: len(req.Input)}
		for _, text := range req.Input {
			resp.Embeddings = append(resp.Embeddings, fakeVector(text, dims))
		}
		return fakeReply{Body: mustJSON(t, resp)}
	}
}

// sleepRecorder replaces the providers' wait between retries, recording
// each wait instead of spending it.
type sleepRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleepRecorder) recorded() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}
