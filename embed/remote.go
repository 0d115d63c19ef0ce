package embed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Defaults shared by the HTTP providers.
const (
	DefaultBatchSize  = 64
	DefaultMaxRetries = 5
	DefaultTimeout    = 60 * time.Second
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 60 * time.Second
)

// maxResponseBytes bounds a success body: 2048 inputs of 3072 floats written
// as JSON text stay well below it.
const maxResponseBytes = 256 << 20

// probeText is embedded once to learn the vector size when it is not configured.
const probeText = "dimension probe"

// httpSettings are the knobs common to the HTTP providers, already defaulted.
type httpSettings struct {
	provider   string
	endpoint   string
	apiKey     string
	client     *http.Client
	timeout    time.Duration
	maxRetries int
	minBackoff time.Duration
	maxBackoff time.Duration
	// sleep waits between attempts; tests replace it to observe waits
	// without spending them.
	sleep func(ctx context.Context, d time.Duration) error
}

func newHTTPSettings(provider, base, path, apiKey string, client *http.Client, timeout time.Duration, maxRetries int, minBackoff, maxBackoff time.Duration) (httpSettings, error) {
	endpoint, err := joinEndpoint(base, path)
	if err != nil {
		return httpSettings{}, fmt.Errorf("%w: %s base URL: %w", ErrConfig, provider, err)
	}
	if client == nil {
		client = &http.Client{}
	}
	if timeout < 0 || minBackoff < 0 || maxBackoff < 0 {
		return httpSettings{}, fmt.Errorf("%w: %s: negative timeout or backoff", ErrConfig, provider)
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	switch {
	case maxRetries == 0:
		maxRetries = DefaultMaxRetries
	case maxRetries < 0:
		maxRetries = 0
	}
	if minBackoff == 0 {
		minBackoff = DefaultMinBackoff
	}
	if maxBackoff == 0 {
		maxBackoff = DefaultMaxBackoff
	}
	if maxBackoff < minBackoff {
		maxBackoff = minBackoff
	}
	return httpSettings{
		provider:   provider,
		endpoint:   endpoint,
		apiKey:     apiKey,
		client:     client,
		timeout:    timeout,
		maxRetries: maxRetries,
		minBackoff: minBackoff,
		maxBackoff: maxBackoff,
		sleep:      sleepCtx,
	}, nil
}

// joinEndpoint appends path to an http(s) base URL, keeping any path prefix
// the base has (".../v1").
func joinEndpoint(base, path string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute http(s) URL", base)
	}
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	return u.String(), nil
}

// post sends body as JSON and decodes a 2xx answer into out, retrying
// transient failures with exponential backoff and jitter, honouring
// Retry-After, until maxRetries retries are spent or ctx is done.
func (h *httpSettings) post(ctx context.Context, body, out any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", h.provider, err)
	}
	for attempt := 0; ; attempt++ {
		err := h.once(ctx, payload, out)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (last error: %v)", h.provider, ctx.Err(), err)
		}
		if !Retryable(err) || attempt >= h.maxRetries {
			if attempt > 0 {
				return fmt.Errorf("%w (gave up after %d attempts)", err, attempt+1)
			}
			return err
		}
		var retryAfter time.Duration
		if se := (*StatusError)(nil); errors.As(err, &se) {
			retryAfter = se.RetryAfter
		}
		if serr := h.sleep(ctx, h.backoff(attempt, retryAfter)); serr != nil {
			return fmt.Errorf("%s: %w (last error: %v)", h.provider, serr, err)
		}
	}
}

// once makes a single attempt, bounded by the per-request timeout.
func (h *httpSettings) once(ctx context.Context, payload []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.endpoint, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("%s: build request: %w", h.provider, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if h.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+h.apiKey)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", h.provider, ErrUnavailable, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Only the start of an error body is worth reading; drain a little
		// more so the connection can be reused.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 256<<10))
		return &StatusError{
			Provider:   h.provider,
			StatusCode: resp.StatusCode,
			Message:    errorMessage(body),
			RetryAfter: retryAfter(resp.Header, time.Now()),
		}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w: read response: %w", h.provider, ErrUnavailable, err)
	}
	if len(body) > maxResponseBytes {
		return fmt.Errorf("%s: %w: response larger than %d bytes", h.provider, ErrBadResponse, maxResponseBytes)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s: %w: decode: %w", h.provider, ErrBadResponse, err)
	}
	return nil
}

// backoff returns the wait before retry number attempt+1: exponential from
// minBackoff with "equal jitter" (half fixed, half random) so that clients
// that failed together do not retry together, never shorter than what the
// server asked for, and never longer than maxBackoff.
func (h *httpSettings) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := h.maxBackoff
	if attempt < 32 {
		if e := h.minBackoff << attempt; e > 0 && e < d {
			d = e
		}
	}
	d = d/2 + rand.N(d/2+1)
	d = max(d, retryAfter)
	return min(d, h.maxBackoff)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter reads the wait a server asks for: Retry-After in seconds or as an
// HTTP date, or the millisecond Retry-After-Ms some OpenAI-compatible servers
// send. It returns 0 when there is none or it cannot be parsed.
func retryAfter(hdr http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(hdr.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(hdr.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 || s > 1e6 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// errorMessage extracts the human message from an error body. It knows the
// OpenAI shape {"error":{"message":...}}, the Ollama and TEI shape
// {"error":"..."} and a bare {"message":...}; otherwise it returns the start
// of the body as text.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) == nil {
		var obj struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
			return obj.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case v.Message != "":
			return v.Message
		}
	}
	msg := strings.Join(strings.Fields(string(body)), " ")
	const limit = 300
	if len(msg) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// remote batches texts over a provider's HTTP call and checks what comes back.
type remote struct {
	http      httpSettings
	batchSize int
	// dims is the configured vector size or, when that is 0, the size
	// learnt from the first answer.
	dims    atomic.Int64
	probeMu sync.Mutex
	// call embeds one batch; it returns one vector per input, in order.
	call func(ctx context.Context, texts []string) ([][]float32, error)
}

func (r *remote) init(h httpSettings, batchSize, dims int, call func(context.Context, []string) ([][]float32, error)) error {
	if batchSize < 0 || dims < 0 {
		return fmt.Errorf("%w: %s: negative batch size or dimensions", ErrConfig, h.provider)
	}
	if batchSize == 0 {
		batchSize = DefaultBatchSize
	}
	r.http = h
	r.batchSize = batchSize
	r.dims.Store(int64(dims))
	r.call = call
	return nil
}

func (r *remote) embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += r.batchSize {
		end := min(start+r.batchSize, len(texts))
		vecs, err := r.call(ctx, texts[start:end])
		if err == nil {
			err = r.check(vecs, end-start)
		}
		if err != nil {
			return nil, fmt.Errorf("embed texts %d-%d of %d: %w", start, end-1, len(texts), err)
		}
		out = append(out, vecs...)
	}
	return out, nil
}

// check verifies a batch answer: n vectors, all of the known size. When the
// size is not known yet, the first answer sets it.
func (r *remote) check(vecs [][]float32, n int) error {
	if len(vecs) != n {
		return fmt.Errorf("%s: %w: got %d vectors for %d inputs", r.http.provider, ErrBadResponse, len(vecs), n)
	}
	if n == 0 {
		return nil
	}
	if len(vecs[0]) == 0 {
		return fmt.Errorf("%s: %w: empty vector", r.http.provider, ErrBadResponse)
	}
	r.dims.CompareAndSwap(0, int64(len(vecs[0])))
	want := int(r.dims.Load())
	for i, v := range vecs {
		if len(v) != want {
			return fmt.Errorf("%s: %w: vector %d has %d dimensions, want %d", r.http.provider, ErrBadResponse, i, len(v), want)
		}
	}
	return nil
}

// probe learns the vector size with a one-text request unless it is known.
func (r *remote) probe(ctx context.Context) (int, error) {
	if d := r.dims.Load(); d > 0 {
		return int(d), nil
	}
	r.probeMu.Lock()
	defer r.probeMu.Unlock()
	if d := r.dims.Load(); d > 0 {
		return int(d), nil
	}
	vecs, err := r.call(ctx, []string{probeText})
	if err == nil {
		err = r.check(vecs, 1)
	}
	if err != nil {
		return 0, fmt.Errorf("probe dimensions: %w", err)
	}
	return int(r.dims.Load()), nil
}

// dimensions returns the known size, probing once (bounded by the request
// timeout) when it is not known; 0 means the probe failed.
func (r *remote) dimensions() int {
	if d := r.dims.Load(); d > 0 {
		return int(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.http.timeout)
	defer cancel()
	d, _ := r.probe(ctx)
	return d
}

// vector decodes an embedding given either as a JSON array of numbers or, as
// some OpenAI-compatible servers answer whatever was asked, as base64 of
// little-endian float32s.
type vector []float32

// UnmarshalJSON accepts a number array or a base64 string.
func (v *vector) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return v.fromBase64(s)
	}
	return json.Unmarshal(b, (*[]float32)(v))
}
