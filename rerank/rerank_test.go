package rerank

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// standIn is a reranker in the test: it scores a text by how many of the
// query's words it holds, in the shape of TEI or of Cohere, and records the
// requests it got.
type standIn struct {
	*httptest.Server
	got []map[string]any
}

func newStandIn(t *testing.T, api API, answer func(w http.ResponseWriter, scores []float64)) *standIn {
	t.Helper()
	s := &standIn{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		req["authorization"] = r.Header.Get("Authorization")
		s.got = append(s.got, req)
		key := "texts"
		if api == Cohere {
			key = "documents"
		}
		texts, _ := req[key].([]any)
		words := strings.Fields(strings.ToLower(req["query"].(string)))
		scores := make([]float64, len(texts))
		for i, tx := range texts {
			for _, w := range words {
				if strings.Contains(strings.ToLower(tx.(string)), w) {
					scores[i]++
				}
			}
		}
		answer(w, scores)
	}))
	t.Cleanup(s.Close)
	return s
}

func teiAnswer(w http.ResponseWriter, scores []float64) {
	type entry struct {
		Index int     `json:"index"`
		Score float64 `json:"score"`
	}
	var out []entry
	// TEI answers best first.
	for i := len(scores) - 1; i >= 0; i-- {
		out = append(out, entry{i, scores[i]})
	}
	json.NewEncoder(w).Encode(out)
}

func cohereAnswer(w http.ResponseWriter, scores []float64) {
	type entry struct {
		Index          int     `json:"index"`
		RelevanceScore float64 `json:"relevance_score"`
	}
	var out struct {
		Results []entry `json:"results"`
	}
	for i, s := range scores {
		out.Results = append(out.Results, entry{i, s})
	}
	json.NewEncoder(w).Encode(out)
}

func TestRerank(t *testing.T) {
	texts := []string{"nothing here", "the default port is 5432", "port"}
	for _, tc := range []struct {
		name, path string
		api        API
		answer     func(http.ResponseWriter, []float64)
	}{
		{"tei", "/rerank", TEI, teiAnswer},
		{"cohere", "/v1/rerank", Cohere, cohereAnswer},
		{"cohere v2", "/v2/rerank", Cohere, cohereAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStandIn(t, tc.api, tc.answer)
			c, err := New(Options{URL: s.URL + tc.path, APIKey: "k3y", Model: "rerank-test"})
			if err != nil {
				t.Fatal(err)
			}
			if c.API() != tc.api {
				t.Fatalf("API %s, want %s", c.API(), tc.api)
			}
			scores, err := c.Rerank(context.Background(), "default port", texts)
			if err != nil {
				t.Fatal(err)
			}
			if len(scores) != 3 || scores[1] != 2 || scores[2] != 1 || scores[0] != 0 {
				t.Fatalf("scores %v, want [0 2 1] in the texts' order", scores)
			}
			req := s.got[0]
			if req["authorization"] != "Bearer k3y" {
				t.Errorf("authorization %v", req["authorization"])
			}
			if tc.api == Cohere && (req["model"] != "rerank-test" || req["top_n"] != float64(3)) {
				t.Errorf("cohere request %v", req)
			}
			st := c.Status()
			if st.LastOK.IsZero() || st.LastError != "" || strings.Contains(st.URL, "k3y") {
				t.Errorf("status %+v", st)
			}
		})
	}
}

func TestRerankFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"error status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":"model overloaded"}`, http.StatusServiceUnavailable)
		}, "HTTP 503"},
		{"not json", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>")) }, "not a list of scores"},
		{"missing score", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`[{"index":0,"score":1}]`)) }, "no score for text 2"},
		{"index out of range", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`[{"index":0,"score":1},{"index":7,"score":1}]`))
		}, "do not give each"},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			// Read the request whole, so the server notices the client
			// hanging up.
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
		}, "no answer within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewServer(tc.handler)
			t.Cleanup(s.Close)
			c, err := New(Options{URL: s.URL + "/rerank", Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Rerank(context.Background(), "q", []string{"a", "b"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if c.Status().LastError == "" {
				t.Error("the status does not keep the failure")
			}
		})
	}
	if _, err := New(Options{URL: "ftp://x/rerank"}); err == nil {
		t.Error("an ftp URL was accepted")
	}
}
