package embed

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"absent", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"padded seconds", map[string]string{"Retry-After": " 3 "}, 3 * time.Second},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"HTTP date ahead", map[string]string{"Retry-After": "Sat, 01 Mar 2025 12:00:45 GMT"}, 45 * time.Second},
		{"HTTP date past", map[string]string{"Retry-After": "Sat, 01 Mar 2025 11:00:00 GMT"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "1500", "Retry-After": "2"}, 1500 * time.Millisecond},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "x", "Retry-After": "2"}, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := retryAfter(h, now); got != tt.want {
				t.Errorf("retryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	h := httpSettings{minBackoff: 100 * time.Millisecond, maxBackoff: 2 * time.Second}
	tests := []struct {
		attempt    int
		retryAfter time.Duration
		lo, hi     time.Duration
	}{
		{0, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{1, 0, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 0, 400 * time.Millisecond, 800 * time.Millisecond},
		{10, 0, time.Second, 2 * time.Second},
		{100, 0, time.Second, 2 * time.Second},
		{0, 1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond},
		{0, time.Hour, 2 * time.Second, 2 * time.Second},
	}
	for _, tt := range tests {
		for range 50 {
			if d := h.backoff(tt.attempt, tt.retryAfter); d < tt.lo || d > tt.hi {
				t.Fatalf("backoff(%d, %v) = %v, want %v..%v", tt.attempt, tt.retryAfter, d, tt.lo, tt.hi)
			}
		}
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"message":"Invalid model","type":"invalid_request_error"}}`, "Invalid model"},
		{`{"error":"model \"x\" not found"}`, `model "x" not found`},
		{`{"error":"Input validation error","error_type":"Validation"}`, "Input validation error"},
		{`{"message":"overloaded"}`, "overloaded"},
		{"<html>\n<body>502   Bad Gateway</body>\n</html>", "<html> <body>502 Bad Gateway</body> </html>"},
		{"", ""},
		{strings.Repeat("é", 400), strings.Repeat("é", 150) + "..."},
	}
	for _, tt := range tests {
		if got := errorMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("errorMessage(%.40q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestStatusErrorClass(t *testing.T) {
	tests := []struct {
		code      int
		retryable bool
	}{
		{400, false}, {401, false}, {403, false}, {404, false}, {408, true}, {413, false},
		{422, false}, {429, true}, {500, true}, {501, false}, {502, true}, {503, true}, {504, true},
	}
	for _, tt := range tests {
		err := &StatusError{Provider: "openai", StatusCode: tt.code}
		if Retryable(err) != tt.retryable {
			t.Errorf("Retryable(HTTP %d) = %v, want %v", tt.code, !tt.retryable, tt.retryable)
		}
	}
	if Retryable(nil) {
		t.Error("Retryable(nil) = true")
	}
}

func TestJoinEndpoint(t *testing.T) {
	tests := []struct{ base, path, want string }{
		{"https://api.openai.com/v1", "/embeddings", "https://api.openai.com/v1/embeddings"},
		{"http://localhost:8080/v1/", "/embeddings", "http://localhost:8080/v1/embeddings"},
		{"http://localhost:11434", "/api/embed", "http://localhost:11434/api/embed"},
		{" http://localhost:11434/ ", "/api/embed", "http://localhost:11434/api/embed"},
	}
	for _, tt := range tests {
		got, err := joinEndpoint(tt.base, tt.path)
		if err != nil || got != tt.want {
			t.Errorf("joinEndpoint(%q) = %q, %v; want %q", tt.base, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "localhost:11434", "/v1", "unix:///tmp/x"} {
		if _, err := joinEndpoint(bad, "/x"); err == nil {
			t.Errorf("joinEndpoint(%q) accepted", bad)
		}
	}
}
