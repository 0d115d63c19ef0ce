package embed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// DefaultOllamaBaseURL is where a local Ollama listens by default.
const DefaultOllamaBaseURL = "http://localhost:11434"

// OllamaConfig configures an embedder for Ollama's native /api/embed endpoint.
type OllamaConfig struct {
	// BaseURL is the server root; "" means http://localhost:11434.
	BaseURL string
	// APIKey is sent as a bearer token when set, for an Ollama behind an
	// authenticating proxy; Ollama itself has no keys.
	APIKey string
	// Model is the model name, such as "nomic-embed-text" or
	// "mxbai-embed-large:335m". Required.
	Model string
	// Dimensions is the vector size. When 0 it is learnt from the first
	// answer, or by a one-text probe when Dimensions or Probe is called first.
	Dimensions int
	// BatchSize is the most texts sent in one request; 0 means 64.
	BatchSize int
	// MaxRetries is how often a transient failure is retried; 0 means 5 and
	// a negative value disables retries.
	MaxRetries int
	// HTTPClient sends the requests; nil means a new default client.
	HTTPClient *http.Client
	// Timeout bounds each HTTP attempt, including loading the model on the
	// first request; 0 means 60s.
	Timeout time.Duration
	// KeepAlive is how long Ollama keeps the model loaded after a request:
	// a duration such as "5m" or "1h", or a number of seconds where "0"
	// unloads at once and "-1" keeps it loaded; "" leaves the server default.
	KeepAlive string
	// MinBackoff and MaxBackoff bound the wait between retries; 0 means
	// 500ms and 60s. A Retry-After longer than MaxBackoff is cut to it.
	MinBackoff, MaxBackoff time.Duration
}

// Ollama embeds texts with a local or remote Ollama server. Ollama returns
// vectors already L2-normalised. It is safe for concurrent use.
type Ollama struct {
	model     string
	name      string
	keepAlive json.RawMessage
	r         remote
}

var _ Embedder = (*Ollama)(nil)

// NewOllama validates cfg and returns an Ollama embedder. It makes no request.
func NewOllama(cfg OllamaConfig) (*Ollama, error) {
	model := strings.TrimSpace(cfg.Model)
	if model == "" {
		return nil, fmt.Errorf("%w: ollama: model is required", ErrConfig)
	}
	base := cfg.BaseURL
	if strings.TrimSpace(base) == "" {
		base = DefaultOllamaBaseURL
	}
	h, err := newHTTPSettings("ollama", base, "/api/embed", cfg.APIKey, cfg.HTTPClient, cfg.Timeout, cfg.MaxRetries, cfg.MinBackoff, cfg.MaxBackoff)
	if err != nil {
		return nil, err
	}
	keepAlive, err := keepAliveJSON(cfg.KeepAlive)
	if err != nil {
		return nil, err
	}
	o := &Ollama{model: model, name: "ollama:" + ollamaTagged(model), keepAlive: keepAlive}
	if err := o.r.init(h, cfg.BatchSize, cfg.Dimensions, o.call); err != nil {
		return nil, err
	}
	return o, nil
}

// ollamaTagged adds the ":latest" tag Ollama assumes for an untagged name, so
// that "nomic-embed-text" and "nomic-embed-text:latest" name the same vectors.
func ollamaTagged(model string) string {
	last := model[strings.LastIndex(model, "/")+1:]
	if strings.Contains(last, ":") {
		return model
	}
	return model + ":latest"
}

// Model returns "ollama:<model>:<tag>", the tag defaulting to "latest".
func (o *Ollama) Model() string { return o.name }

// Dimensions returns the vector size. When it was not configured, the first
// call probes the server once; it returns 0 if that fails (Probe reports why).
func (o *Ollama) Dimensions() int { return o.r.dimensions() }

// Probe returns the vector size, asking the server with a one-text request
// if it is not known yet. Call it at startup to surface configuration errors
// such as a model that was never pulled.
func (o *Ollama) Probe(ctx context.Context) (int, error) { return o.r.probe(ctx) }

// Embed returns one vector per text, in order, sending at most BatchSize
// texts per request.
func (o *Ollama) Embed(ctx context.Context, texts []string) (vecs [][]float32, err error) {
	ctx, span := telemetry.StartEmbeddings(ctx, ProviderOllama, o.model, len(texts), true)
	defer func() { telemetry.End(span, err, errorClass) }()
	return o.r.embed(ctx, texts)
}

type ollamaRequest struct {
	Model     string          `json:"model"`
	Input     []string        `json:"input"`
	KeepAlive json.RawMessage `json:"keep_alive,omitempty"`
}

// keepAliveJSON encodes KeepAlive as Ollama parses it: a bare number is a
// count of seconds and must be sent as a JSON number, because a string must
// carry a unit.
func keepAliveJSON(v string) (json.RawMessage, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil, nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return json.Marshal(f)
	}
	if _, err := time.ParseDuration(v); err != nil {
		return nil, fmt.Errorf("%w: ollama: keep-alive %q is neither seconds nor a duration", ErrConfig, v)
	}
	return json.Marshal(v)
}

type ollamaResponse struct {
	Model      string      `json:"model"`
	Embeddings [][]float32 `json:"embeddings"`
}

func (o *Ollama) call(ctx context.Context, texts []string) ([][]float32, error) {
	var resp ollamaResponse
	req := ollamaRequest{Model: o.model, Input: texts, KeepAlive: o.keepAlive}
	if err := o.r.http.post(ctx, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Embeddings) != len(texts) {
		return nil, fmt.Errorf("ollama: %w: got %d embeddings for %d inputs", ErrBadResponse, len(resp.Embeddings), len(texts))
	}
	return resp.Embeddings, nil
}
