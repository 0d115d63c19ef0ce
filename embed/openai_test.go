package embed

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTestOpenAI builds an OpenAI embedder against srv whose retry waits are
// recorded, not spent.
func newTestOpenAI(t *testing.T, srv *fakeServer, cfg OpenAIConfig) (*OpenAI, *sleepRecorder) {
	t.Helper()
	cfg.BaseURL = srv.URL + "/v1"
	if cfg.Model == "" {
		cfg.Model = "text-embedding-3-small"
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	rec := &sleepRecorder{}
	o.r.http.sleep = rec.sleep
	return o, rec
}

func TestOpenAIRequestShape(t *testing.T) {
	tests := []struct {
		name      string
		cfg       OpenAIConfig
		wantAuth  string
		wantDims  bool
		wantModel string
	}{
		{
			name:      "key and plain request",
			cfg:       OpenAIConfig{APIKey: "sk-test", Dimensions: 4},
			wantAuth:  "Bearer sk-test",
			wantModel: "openai:text-embedding-3-small",
		},
		{
			name:      "no key for a local server",
			cfg:       OpenAIConfig{Model: "BAAI/bge-small-en-v1.5", Dimensions: 4},
			wantModel: "openai:BAAI/bge-small-en-v1.5",
		},
		{
			name:      "dimensions sent when asked",
			cfg:       OpenAIConfig{APIKey: "k", Dimensions: 4, SendDimensions: true},
			wantAuth:  "Bearer k",
			wantDims:  true,
			wantModel: "openai:text-embedding-3-small@4",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, openAIAnswer(t, 4))
			o, _ := newTestOpenAI(t, srv, tt.cfg)
			vecs, err := o.Embed(context.Background(), []string{"t0", "t1"})
			if err != nil {
				t.Fatal(err)
			}
			checkOrder(t, vecs, 2, 4)
			if o.Model() != tt.wantModel {
				t.Errorf("Model() = %q, want %q", o.Model(), tt.wantModel)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != http.MethodPost || r.Path != "/v1/embeddings" {
				t.Errorf("request %s %s, want POST /v1/embeddings", r.Method, r.Path)
			}
			if got := r.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := r.Header.Get("Authorization"); got != tt.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tt.wantAuth)
			}
			var model, format string
			_ = json.Unmarshal(r.Body["model"], &model)
			_ = json.Unmarshal(r.Body["encoding_format"], &format)
			wantName := tt.cfg.Model
			if wantName == "" {
				wantName = "text-embedding-3-small"
			}
			if model != wantName || format != "float" {
				t.Errorf("body model %q format %q", model, format)
			}
			if strings.Join(r.Input, ",") != "t0,t1" {
				t.Errorf("input %q", r.Input)
			}
			dims, has := r.Body["dimensions"]
			if has != tt.wantDims {
				t.Errorf("dimensions field present = %v, want %v", has, tt.wantDims)
			}
			if has && string(dims) != "4" {
				t.Errorf("dimensions = %s, want 4", dims)
			}
		})
	}
}

func TestOpenAIBatching(t *testing.T) {
	tests := []struct {
		texts, batch int
		wantSizes    []int
	}{
		{texts: 150, batch: 0, wantSizes: []int{64, 64, 22}},
		{texts: 10, batch: 5, wantSizes: []int{5, 5}},
		{texts: 3, batch: 100, wantSizes: []int{3}},
		{texts: 0, batch: 2, wantSizes: nil},
	}
	for _, tt := range tests {
		srv := newFakeServer(t, openAIAnswer(t, 3))
		o, _ := newTestOpenAI(t, srv, OpenAIConfig{Dimensions: 3, BatchSize: tt.batch})
		vecs, err := o.Embed(context.Background(), textsN(tt.texts))
		if err != nil {
			t.Fatal(err)
		}
		checkOrder(t, vecs, tt.texts, 3)
		var sizes []int
		for _, r := range srv.requests() {
			sizes = append(sizes, len(r.Input))
		}
		if mustJSON(t, sizes) != mustJSON(t, tt.wantSizes) {
			t.Errorf("%d texts, batch %d: request sizes %v, want %v", tt.texts, tt.batch, sizes, tt.wantSizes)
		}
	}
}

func TestOpenAIOutOfOrderIndices(t *testing.T) {
	reversed := func(req fakeRequest) fakeReply {
		var b strings.Builder
		b.WriteString(`{"object":"list","data":[`)
		for i := len(req.Input) - 1; i >= 0; i-- {
			b.WriteString(mustJSON(t, map[string]any{"object": "embedding", "index": i, "embedding": fakeVector(req.Input[i], 3)}))
			if i > 0 {
				b.WriteByte(',')
			}
		}
		b.WriteString(`],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
		return fakeReply{Body: b.String()}
	}
	srv := newFakeServer(t, reversed)
	o, _ := newTestOpenAI(t, srv, OpenAIConfig{Dimensions: 3})
	vecs, err := o.Embed(context.Background(), textsN(7))
	if err != nil {
		t.Fatal(err)
	}
	checkOrder(t, vecs, 7, 3)
}

func TestOpenAIBase64Embedding(t *testing.T) {
	want := []float32{0.25, -1.5, 3}
	raw := make([]byte, 4*len(want))
	for i, x := range want {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	body := `{"data":[{"index":0,"embedding":"` + base64.StdEncoding.EncodeToString(raw) + `"}]}`
	srv := newFakeServer(t, func(fakeRequest) fakeReply { return fakeReply{Body: body} })
	o, _ := newTestOpenAI(t, srv, OpenAIConfig{})
	vecs, err := o.Embed(context.Background(), []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, vecs[0]) != mustJSON(t, want) {
		t.Errorf("decoded %v, want %v", vecs[0], want)
	}
}

func TestOpenAIRetries(t *testing.T) {
	rateLimited := fakeReply{
		Status: http.StatusTooManyRequests,
		Header: map[string]string{"Retry-After": "2"},
		Body:   `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`,
	}
	serverError := fakeReply{Status: http.StatusInternalServerError, Body: `{"error":{"message":"The server had an error","type":"server_error"}}`}
	tests := []struct {
		name         string
		script       []fakeReply
		maxRetries   int
		wantRequests int
		wantErr      error  // nil for success
		wantMsg      string // in the error
		wantMinWaits []time.Duration
	}{
		{
			name:         "429 with Retry-After then success",
			script:       []fakeReply{rateLimited},
			wantRequests: 2,
			wantMinWaits: []time.Duration{2 * time.Second},
		},
		{
			name: "429 with Retry-After date then success",
			script: []fakeReply{{
				Status: http.StatusTooManyRequests,
				Header: map[string]string{"Retry-After": time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)},
			}},
			wantRequests: 2,
			wantMinWaits: []time.Duration{20 * time.Second},
		},
		{
			name:         "500 then success",
			script:       []fakeReply{serverError},
			wantRequests: 2,
			wantMinWaits: []time.Duration{0},
		},
		{
			name:         "503 502 then success",
			script:       []fakeReply{{Status: 503, Body: "upstream connect error"}, {Status: 502, Body: "<html>Bad Gateway</html>"}},
			wantRequests: 3,
			wantMinWaits: []time.Duration{0, 0},
		},
		{
			name:         "400 fails fast with the message",
			script:       []fakeReply{{Status: http.StatusBadRequest, Body: `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","param":null,"code":null}}`}},
			wantRequests: 1,
			wantErr:      ErrRejected,
			wantMsg:      "maximum context length is 8192 tokens",
		},
		{
			name:         "401 fails fast",
			script:       []fakeReply{{Status: http.StatusUnauthorized, Body: `{"error":{"message":"Incorrect API key provided: sk-xx","type":"invalid_request_error","code":"invalid_api_key"}}`}},
			wantRequests: 1,
			wantErr:      ErrRejected,
			wantMsg:      "Incorrect API key",
		},
		{
			name:         "501 is permanent",
			script:       []fakeReply{{Status: http.StatusNotImplemented, Body: "not implemented"}},
			wantRequests: 1,
			wantErr:      ErrRejected,
			wantMsg:      "not implemented",
		},
		{
			name:         "persistent 500 gives up after the retries",
			script:       []fakeReply{serverError, serverError, serverError, serverError},
			maxRetries:   2,
			wantRequests: 3,
			wantErr:      ErrUnavailable,
			wantMsg:      "The server had an error (gave up after 3 attempts)",
			wantMinWaits: []time.Duration{0, 0},
		},
		{
			name:         "retries disabled",
			script:       []fakeReply{serverError},
			maxRetries:   -1,
			wantRequests: 1,
			wantErr:      ErrUnavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, openAIAnswer(t, 3), tt.script...)
			o, rec := newTestOpenAI(t, srv, OpenAIConfig{Dimensions: 3, MaxRetries: tt.maxRetries})
			vecs, err := o.Embed(context.Background(), textsN(2))
			if got := len(srv.requests()); got != tt.wantRequests {
				t.Errorf("%d requests, want %d", got, tt.wantRequests)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Embed: %v", err)
				}
				checkOrder(t, vecs, 2, 3)
			} else {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error = %v, want %v", err, tt.wantErr)
				}
				if Retryable(err) != errors.Is(tt.wantErr, ErrUnavailable) {
					t.Errorf("Retryable(%v) = %v", err, Retryable(err))
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tt.wantMsg)
				}
			}
			waits := rec.recorded()
			if len(waits) != len(tt.wantMinWaits) {
				t.Fatalf("waited %v, want %d waits", waits, len(tt.wantMinWaits))
			}
			for i, w := range waits {
				if w < tt.wantMinWaits[i] || w > DefaultMaxBackoff {
					t.Errorf("wait %d = %v, want within %v..%v", i, w, tt.wantMinWaits[i], DefaultMaxBackoff)
				}
			}
		})
	}
}

func TestOpenAIBadResponses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"wrong dimensions", `{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1,2]}]}`, "2 dimensions, want 3"},
		{"mixed dimensions", `{"data":[{"index":0,"embedding":[1,2,3]},{"index":1,"embedding":[1,2]}]}`, "2 dimensions, want 3"},
		{"too few", `{"data":[{"index":0,"embedding":[1,2,3]}]}`, "got 1 embeddings for 2 inputs"},
		{"too many", `{"data":[{"index":0,"embedding":[1,2,3]},{"index":1,"embedding":[1,2,3]},{"index":2,"embedding":[1,2,3]}]}`, "got 3 embeddings for 2 inputs"},
		{"repeated index", `{"data":[{"index":1,"embedding":[1,2,3]},{"index":1,"embedding":[1,2,3]}]}`, "index 1 repeated"},
		{"index out of range", `{"data":[{"index":0,"embedding":[1,2,3]},{"index":2,"embedding":[1,2,3]}]}`, "index 2 out of range"},
		{"empty embedding", `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[1,2,3]}]}`, "empty embedding"},
		{"not JSON", `<html>proxy error</html>`, "decode"},
		{"wrong shape", `{"data":{"embedding":[1]}}`, "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, func(fakeRequest) fakeReply { return fakeReply{Body: tt.body} })
			o, rec := newTestOpenAI(t, srv, OpenAIConfig{Dimensions: 3})
			_, err := o.Embed(context.Background(), textsN(2))
			if !errors.Is(err, ErrBadResponse) || Retryable(err) {
				t.Fatalf("error = %v, want a non-retryable ErrBadResponse", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if n := len(srv.requests()); n != 1 || len(rec.recorded()) != 0 {
				t.Errorf("%d requests and %d waits, want 1 and 0", n, len(rec.recorded()))
			}
		})
	}
}

func TestOpenAIContextCancel(t *testing.T) {
	tests := []struct {
		name    string
		script  fakeReply
		backoff bool // cancel once the wait before a retry has begun
		wantMsg string
	}{
		{name: "during request", script: fakeReply{Hang: true}},
		{name: "during backoff", script: fakeReply{Status: 429, Header: map[string]string{"Retry-After": "30"}}, backoff: true, wantMsg: "429"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t, openAIAnswer(t, 3), tt.script)
			// The real wait is used: cancellation must cut it short. The
			// wrapper only tells the test that the wait has begun, so that
			// cancelling cannot land while the 429 is still being read.
			o, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, Model: "m", Dimensions: 3})
			if err != nil {
				t.Fatal(err)
			}
			waiting := make(chan struct{})
			var once sync.Once
			o.r.http.sleep = func(ctx context.Context, d time.Duration) error {
				once.Do(func() { close(waiting) })
				return sleepCtx(ctx, d)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := o.Embed(ctx, textsN(1))
				done <- err
			}()
			srv.waitRequests(t, 1)
			if tt.backoff {
				select {
				case <-waiting:
				case <-time.After(10 * time.Second):
					t.Fatal("Embed never began to wait after the 429")
				}
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) || Retryable(err) {
					t.Fatalf("error = %v, want non-retryable context.Canceled", err)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("error %q does not mention the last failure %q", err, tt.wantMsg)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Embed kept going after cancellation")
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestOpenAINetworkError(t *testing.T) {
	srv := newFakeServer(t, openAIAnswer(t, 3))
	o, rec := newTestOpenAI(t, srv, OpenAIConfig{Dimensions: 3, MaxRetries: 3})
	srv.Close()
	_, err := o.Embed(context.Background(), textsN(1))
	if !errors.Is(err, ErrUnavailable) || !Retryable(err) {
		t.Fatalf("error = %v, want retryable ErrUnavailable", err)
	}
	if n := len(rec.recorded()); n != 3 {
		t.Errorf("%d waits, want 3 retries", n)
	}
}

func TestOpenAIPerAttemptTimeout(t *testing.T) {
	srv := newFakeServer(t, openAIAnswer(t, 3), fakeReply{Hang: true})
	o, rec := newTestOpenAI(t, srv, OpenAIConfig{Dimensions: 3, Timeout: 100 * time.Millisecond})
	vecs, err := o.Embed(context.Background(), textsN(1))
	if err != nil {
		t.Fatalf("Embed after a timed-out attempt: %v", err)
	}
	checkOrder(t, vecs, 1, 3)
	if n, w := len(srv.requests()), len(rec.recorded()); n != 2 || w != 1 {
		t.Errorf("%d requests and %d waits, want 2 and 1", n, w)
	}
}

func TestOpenAIProbe(t *testing.T) {
	t.Run("Dimensions probes once", func(t *testing.T) {
		srv := newFakeServer(t, openAIAnswer(t, 5))
		o, _ := newTestOpenAI(t, srv, OpenAIConfig{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if d := o.Dimensions(); d != 5 {
					t.Errorf("Dimensions() = %d, want 5", d)
				}
			})
		}
		wg.Wait()
		reqs := srv.requests()
		if len(reqs) != 1 || len(reqs[0].Input) != 1 {
			t.Fatalf("requests %+v, want one one-text probe", reqs)
		}
		if _, err := o.Embed(context.Background(), textsN(2)); err != nil {
			t.Fatal(err)
		}
		if len(srv.requests()) != 2 {
			t.Errorf("%d requests, want the probe and one embed", len(srv.requests()))
		}
	})
	t.Run("Embed learns the size", func(t *testing.T) {
		srv := newFakeServer(t, openAIAnswer(t, 6))
		o, _ := newTestOpenAI(t, srv, OpenAIConfig{})
		if _, err := o.Embed(context.Background(), textsN(3)); err != nil {
			t.Fatal(err)
		}
		if d := o.Dimensions(); d != 6 {
			t.Errorf("Dimensions() = %d, want 6", d)
		}
		if d, err := o.Probe(context.Background()); d != 6 || err != nil {
			t.Errorf("Probe() = %d, %v", d, err)
		}
		if n := len(srv.requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("failed probe reports why", func(t *testing.T) {
		srv := newFakeServer(t, func(fakeRequest) fakeReply {
			return fakeReply{Status: 404, Body: `{"error":{"message":"The model 'nope' does not exist","type":"invalid_request_error"}}`}
		})
		o, _ := newTestOpenAI(t, srv, OpenAIConfig{Model: "nope"})
		if _, err := o.Probe(context.Background()); !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("Probe error = %v", err)
		}
		if d := o.Dimensions(); d != 0 {
			t.Errorf("Dimensions() = %d after a failed probe, want 0", d)
		}
	})
}

func TestNewOpenAIConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  OpenAIConfig
		want string // in the error; "" for success
	}{
		{"defaults to the OpenAI API", OpenAIConfig{Model: "text-embedding-3-small", APIKey: "sk"}, ""},
		{"missing model", OpenAIConfig{APIKey: "sk"}, "model is required"},
		{"OpenAI API without key", OpenAIConfig{Model: "m"}, "API key is required"},
		{"send dimensions without dimensions", OpenAIConfig{Model: "m", BaseURL: "http://127.0.0.1:8000/v1", SendDimensions: true}, "SendDimensions needs Dimensions"},
		{"URL without scheme", OpenAIConfig{Model: "m", BaseURL: "localhost:8000/v1"}, "base URL"},
		{"negative batch", OpenAIConfig{Model: "m", BaseURL: "http://127.0.0.1:8000/v1", BatchSize: -1}, "negative batch"},
		{"negative timeout", OpenAIConfig{Model: "m", BaseURL: "http://127.0.0.1:8000/v1", Timeout: -time.Second}, "negative timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewOpenAI(tt.cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("NewOpenAI: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want ErrConfig mentioning %q", err, tt.want)
			}
		})
	}
}
