package embed

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpsearch/mcpsearch/telemetry"
)

// DefaultOpenAIBaseURL is the OpenAI API, used when OpenAIConfig.BaseURL is empty.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// OpenAIConfig configures an embedder for the OpenAI embeddings API or any
// server that speaks it (vLLM, Hugging Face TEI, LM Studio, llama.cpp server,
// Ollama's /v1).
type OpenAIConfig struct {
	// BaseURL is the API root the path /embeddings is appended to, such as
	// "https://api.openai.com/v1" (the default) or "http://localhost:8000/v1".
	BaseURL string
	// APIKey is sent as a bearer token when set. It is required for
	// api.openai.com.
	APIKey string
	// Model is the model name the server expects. Required.
	Model string
	// Dimensions is the vector size. When 0 it is learnt from the first
	// answer, or by a one-text probe when Dimensions or Probe is called first.
	Dimensions int
	// SendDimensions asks the server for vectors of Dimensions by sending the
	// "dimensions" request field. Only some models support it (OpenAI's
	// text-embedding-3 family); others reject the request.
	SendDimensions bool
	// BatchSize is the most texts sent in one request; 0 means 64.
	BatchSize int
	// MaxRetries is how often a transient failure is retried; 0 means 5 and
	// a negative value disables retries.
	MaxRetries int
	// HTTPClient sends the requests; nil means a new default client.
	HTTPClient *http.Client
	// Timeout bounds each HTTP attempt; 0 means 60s.
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries; 0 means
	// 500ms and 60s. A Retry-After longer than MaxBackoff is cut to it.
	MinBackoff, MaxBackoff time.Duration
}

// OpenAI embeds texts with an OpenAI-compatible /embeddings endpoint. It is
// safe for concurrent use.
type OpenAI struct {
	model    string
	name     string
	sendDims bool
	r        remote
}

var _ Embedder = (*OpenAI)(nil)

// NewOpenAI validates cfg and returns an OpenAI embedder. It makes no request.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	model := strings.TrimSpace(cfg.Model)
	if model == "" {
		return nil, fmt.Errorf("%w: openai: model is required", ErrConfig)
	}
	base := cfg.BaseURL
	if strings.TrimSpace(base) == "" {
		base = DefaultOpenAIBaseURL
	}
	if u, err := url.Parse(strings.TrimSpace(base)); err == nil && strings.EqualFold(u.Hostname(), "api.openai.com") && cfg.APIKey == "" {
		return nil, fmt.Errorf("%w: openai: API key is required for %s", ErrConfig, base)
	}
	if cfg.SendDimensions && cfg.Dimensions <= 0 {
		return nil, fmt.Errorf("%w: openai: SendDimensions needs Dimensions > 0", ErrConfig)
	}
	h, err := newHTTPSettings("openai", base, "/embeddings", cfg.APIKey, cfg.HTTPClient, cfg.Timeout, cfg.MaxRetries, cfg.MinBackoff, cfg.MaxBackoff)
	if err != nil {
		return nil, err
	}
	o := &OpenAI{model: model, name: "openai:" + model, sendDims: cfg.SendDimensions}
	if cfg.SendDimensions {
		// The same model asked for another size yields different
		// vectors, so the size is part of the name.
		o.name += "@" + strconv.Itoa(cfg.Dimensions)
	}
	if err := o.r.init(h, cfg.BatchSize, cfg.Dimensions, o.call); err != nil {
		return nil, err
	}
	return o, nil
}

// Model returns "openai:<model>", with "@<dimensions>" appended when
// SendDimensions is set.
func (o *OpenAI) Model() string { return o.name }

// Dimensions returns the vector size. When it was not configured, the first
// call probes the server once; it returns 0 if that fails (Probe reports why).
func (o *OpenAI) Dimensions() int { return o.r.dimensions() }

// Probe returns the vector size, asking the server with a one-text request
// if it is not known yet. Call it at startup to surface configuration errors.
func (o *OpenAI) Probe(ctx context.Context) (int, error) { return o.r.probe(ctx) }

// Embed returns one vector per text, in order, sending at most BatchSize
// texts per request.
func (o *OpenAI) Embed(ctx context.Context, texts []string) (vecs [][]float32, err error) {
	ctx, span := telemetry.StartEmbeddings(ctx, ProviderOpenAI, o.model, len(texts), true)
	defer func() { telemetry.End(span, err, errorClass) }()
	return o.r.embed(ctx, texts)
}

type openAIRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

type openAIResponse struct {
	Data []struct {
		Embedding vector `json:"embedding"`
		Index     *int   `json:"index"`
	} `json:"data"`
	Model string `json:"model"`
}

// call embeds one batch and puts the answers in input order: the API pairs
// each vector with the index of its input and does not promise any order.
func (o *OpenAI) call(ctx context.Context, texts []string) ([][]float32, error) {
	req := openAIRequest{Model: o.model, Input: texts, EncodingFormat: "float"}
	if o.sendDims {
		req.Dimensions = int(o.r.dims.Load())
	}
	var resp openAIResponse
	if err := o.r.http.post(ctx, req, &resp); err != nil {
		return nil, err
	}
	if len(resp.Data) != len(texts) {
		return nil, fmt.Errorf("openai: %w: got %d embeddings for %d inputs", ErrBadResponse, len(resp.Data), len(texts))
	}
	out := make([][]float32, len(texts))
	for pos, d := range resp.Data {
		i := pos
		if d.Index != nil {
			i = *d.Index
		}
		if i < 0 || i >= len(out) {
			return nil, fmt.Errorf("openai: %w: index %d out of range 0..%d", ErrBadResponse, i, len(out)-1)
		}
		if out[i] != nil {
			return nil, fmt.Errorf("openai: %w: index %d repeated", ErrBadResponse, i)
		}
		if len(d.Embedding) == 0 {
			return nil, fmt.Errorf("openai: %w: empty embedding at index %d", ErrBadResponse, i)
		}
		out[i] = d.Embedding
	}
	return out, nil
}

func (v *vector) fromBase64(s string) error {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return fmt.Errorf("base64 embedding: %w", err)
	}
	if len(raw)%4 != 0 {
		return fmt.Errorf("base64 embedding: %d bytes is not a whole number of float32s", len(raw))
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	*v = out
	return nil
}
