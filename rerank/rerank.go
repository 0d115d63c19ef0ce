// Package rerank asks a cross-encoder reranker behind an HTTP API how
// relevant each of a few texts is to a query: Hugging Face Text Embeddings
// Inference's /rerank, or the v1 (and v2) /rerank of Cohere and Jina. It
// knows HTTP, not MCP, and keeps how its last calls went for readiness
// checks.
package rerank

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds one call unless Options.Timeout says otherwise.
const DefaultTimeout = 2 * time.Second

// maxResponseBytes bounds a reranker's answer: a score per text.
const maxResponseBytes = 4 << 20

// API is the shape of a reranker's requests and answers.
type API string

const (
	// TEI is Text Embeddings Inference's POST /rerank: {"query", "texts"}
	// answered by [{"index", "score"}].
	TEI API = "tei"
	// Cohere is POST /v1/rerank (and /v2/rerank) of Cohere, which Jina
	// shares: {"model", "query", "documents", "top_n"} answered by
	// {"results": [{"index", "relevance_score"}]}.
	Cohere API = "cohere"
)

// Options configure a Client.
type Options struct {
	// URL is the reranker's endpoint, for example
	// http://localhost:8081/rerank (TEI) or https://api.cohere.com/v2/rerank.
	URL string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// Model is sent with Cohere-shaped requests, which need one.
	Model string
	// Timeout bounds one call (default DefaultTimeout).
	Timeout time.Duration
	// HTTP is the client requests go through (default: a new one).
	HTTP *http.Client
}

// Client calls one reranker. It is safe for concurrent use.
type Client struct {
	opts Options
	api  API
	http *http.Client

	mu      sync.Mutex
	lastOK  time.Time
	lastErr error
	lastAt  time.Time
}

// New returns a Client of the reranker at opts.URL. Its API is told from
// the URL's path: one ending in /v1/rerank or /v2/rerank is Cohere's shape
// (Cohere, Jina), any other TEI's.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(opts.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("rerank: URL %q is not an http(s) URL such as http://localhost:8081/rerank", opts.URL)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	c := &Client{opts: opts, api: TEI, http: opts.HTTP}
	if c.http == nil {
		c.http = &http.Client{}
	}
	p := strings.TrimSuffix(u.Path, "/")
	if strings.HasSuffix(p, "/v1/rerank") || strings.HasSuffix(p, "/v2/rerank") {
		c.api = Cohere
	}
	return c, nil
}

// API returns the request shape the client sends.
func (c *Client) API() API { return c.api }

// Status is how the reranker's recent calls went.
type Status struct {
	URL string `json:"url"`
	API API    `json:"api"`
	// LastOK is when a call last succeeded; zero before.
	LastOK time.Time `json:"last_ok,omitzero"`
	// LastError is the error of the last call when it failed; "" when it
	// succeeded or none was made.
	LastError string `json:"last_error,omitempty"`
}

// Status reports the reranker's address (without credentials) and how its
// last call went.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Status{URL: redact(c.opts.URL), API: c.api, LastOK: c.lastOK}
	if c.lastErr != nil {
		st.LastError = c.lastErr.Error()
	}
	return st
}

// Rerank returns one relevance score per text, in the texts' order, higher
// is more relevant. It fails when the reranker does not answer within the
// timeout, answers an error, or answers scores that do not cover every
// text once.
func (c *Client) Rerank(ctx context.Context, query string, texts []string) (scores []float64, err error) {
	defer func() {
		c.mu.Lock()
		c.lastAt, c.lastErr = time.Now(), err
		if err == nil {
			c.lastOK = c.lastAt
		}
		c.mu.Unlock()
	}()
	if len(texts) == 0 {
		return nil, nil
	}
	var body any
	switch c.api {
	case Cohere:
		body = map[string]any{"model": c.opts.Model, "query": query, "documents": texts, "top_n": len(texts), "return_documents": false}
	default:
		body = map[string]any{"query": query, "texts": texts, "truncate": true, "raw_scores": false}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	// late says why the answer did not come: the reranker's own time-out,
	// or the end of the call it serves.
	late := func(what string) error {
		if parent.Err() != nil {
			return fmt.Errorf("rerank: %s before the call's time ran out", what)
		}
		return fmt.Errorf("rerank: %s within %v", what, c.opts.Timeout)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.URL, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("rerank: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, late("no answer")
		}
		return nil, fmt.Errorf("rerank: %s unreachable: %w", redact(c.opts.URL), unwrapURL(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, late("no whole answer")
		}
		return nil, fmt.Errorf("rerank: reading the answer: %w", err)
	}
	if len(raw) > maxResponseBytes {
		return nil, fmt.Errorf("rerank: the answer is over %d bytes", maxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rerank: HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), snippet(raw))
	}
	return parse(raw, len(texts))
}

// ranked is one entry of an answer, in either shape.
type ranked struct {
	Index          *int     `json:"index"`
	Score          *float64 `json:"score"`
	RelevanceScore *float64 `json:"relevance_score"`
}

// parse reads an answer of either shape ([{"index","score"}] or
// {"results": [{"index","relevance_score"}]}) into a score per text.
func parse(raw []byte, n int) ([]float64, error) {
	var list []ranked
	if err := json.Unmarshal(raw, &list); err != nil {
		var wrapped struct {
			Results []ranked `json:"results"`
		}
		if err2 := json.Unmarshal(raw, &wrapped); err2 != nil || wrapped.Results == nil {
			return nil, fmt.Errorf("rerank: the answer is not a list of scores: %s", snippet(raw))
		}
		list = wrapped.Results
	}
	scores := make([]float64, n)
	seen := make([]bool, n)
	for _, r := range list {
		score := r.Score
		if score == nil {
			score = r.RelevanceScore
		}
		if r.Index == nil || score == nil || *r.Index < 0 || *r.Index >= n || seen[*r.Index] {
			return nil, fmt.Errorf("rerank: the answer's entries do not give each of the %d texts one score: %s", n, snippet(raw))
		}
		seen[*r.Index] = true
		scores[*r.Index] = *score
	}
	for i, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("rerank: the answer has no score for text %d of %d", i+1, n)
		}
	}
	return scores, nil
}

func snippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// redact drops credentials and the query from a URL for display.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// unwrapURL drops the *url.Error around a transport error, whose text
// repeats the URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
