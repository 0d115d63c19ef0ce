package eval

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeDataset writes BEIR files into a fresh folder; a name ending in .gz
// is written gzipped.
func writeDataset(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data := []byte(content)
		if strings.HasSuffix(name, ".gz") {
			var b strings.Builder
			zw := gzip.NewWriter(&b)
			if _, err := zw.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			data = []byte(b.String())
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoad(t *testing.T) {
	long := strings.Repeat("word ", 60_000) // 300 KB: beyond bufio.Scanner's default 64 KiB
	corpus := `{"_id":"d1","title":"First","text":"alpha","metadata":{"url":"http://example.com","tags":["a","b"]}}

{"text":"beta","_id":"d2","title":"","extra":[1,2,{"x":null}]}
{"_id":7,"title":"Numeric id","text":"gamma"}
{"_id":"d4","title":"Long","text":"` + long + `"}` + "\r\n"
	queries := `{"_id":"q1","text":"find alpha","metadata":{}}
{"_id":"q2","text":"unjudged"}
{"_id":"q3","text":"only zero judgements"}
{"_id":"q4","text":"long and numeric"}
`
	wantCorpus := []Doc{
		{ID: "d1", Title: "First", Text: "alpha"},
		{ID: "d2", Title: "", Text: "beta"},
		{ID: "7", Title: "Numeric id", Text: "gamma"},
		{ID: "d4", Title: "Long", Text: long},
	}
	wantQueries := []Query{{ID: "q1", Text: "find alpha"}, {ID: "q4", Text: "long and numeric"}}
	wantQrels := map[string]map[string]int{
		"q1": {"d1": 2, "d2": 1},
		"q3": {"d2": 0},
		"q4": {"7": 1, "d4": 1, "missing-doc": 1},
	}
	qrelsBody := "q1\td1\t2\nq1\td2\t1\nq3\td2\t0\nq4\t7\t1\nq4\td4\t1\nq4\tmissing-doc\t1\n"
	tests := []struct {
		name  string
		files map[string]string
	}{
		{"with header", map[string]string{"corpus.jsonl": corpus, "queries.jsonl": queries, "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + qrelsBody}},
		{"without header", map[string]string{"corpus.jsonl": corpus, "queries.jsonl": queries, "qrels/test.tsv": qrelsBody}},
		{"CRLF and blank lines", map[string]string{"corpus.jsonl": corpus, "queries.jsonl": queries, "qrels/test.tsv": "query-id\tcorpus-id\tscore\r\n\r\n" + strings.ReplaceAll(qrelsBody, "\n", "\r\n")}},
		{"TREC four columns", map[string]string{"corpus.jsonl": corpus, "queries.jsonl": queries, "qrels/test.tsv": "q1 0 d1 2\nq1 0 d2 1\nq3 0 d2 0\nq4 0 7 1\nq4 0 d4 1\nq4 0 missing-doc 1\n"}},
		{"gzipped", map[string]string{"corpus.jsonl.gz": corpus, "queries.jsonl.gz": queries, "qrels/test.tsv": qrelsBody}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds, err := Load(writeDataset(t, tt.files))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(ds.Corpus, wantCorpus) {
				t.Errorf("corpus: got %d docs, first IDs %v", len(ds.Corpus), docIDs(ds.Corpus))
			}
			if !reflect.DeepEqual(ds.Queries, wantQueries) {
				t.Errorf("queries = %+v, want %+v", ds.Queries, wantQueries)
			}
			if !reflect.DeepEqual(ds.Qrels, wantQrels) {
				t.Errorf("qrels = %v, want %v", ds.Qrels, wantQrels)
			}
		})
	}
}

func docIDs(docs []Doc) []string {
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.ID)
	}
	return ids
}

func TestLoadErrors(t *testing.T) {
	good := map[string]string{
		"corpus.jsonl":   `{"_id":"d1","text":"x"}` + "\n",
		"queries.jsonl":  `{"_id":"q1","text":"x"}` + "\n",
		"qrels/test.tsv": "q1\td1\t1\n",
	}
	with := func(name, content string) map[string]string {
		files := make(map[string]string)
		for k, v := range good {
			if k != name {
				files[k] = v
			}
		}
		if content != "" {
			files[name] = content
		}
		return files
	}
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no corpus", with("corpus.jsonl", ""), "corpus.jsonl"},
		{"no qrels", with("qrels/test.tsv", ""), "test.tsv"},
		{"bad JSON line", with("corpus.jsonl", `{"_id":"d1","text":"x"}`+"\n"+`{"_id":"d2","text":`+"\n"), "corpus.jsonl:2:"},
		{"missing id", with("queries.jsonl", `{"text":"x"}`), `queries.jsonl:1: missing "_id"`},
		{"empty id", with("corpus.jsonl", `{"_id":" ","text":"x"}`), `empty "_id"`},
		{"object id", with("corpus.jsonl", `{"_id":{"a":1},"text":"x"}`), "neither string nor number"},
		{"repeated id", with("corpus.jsonl", `{"_id":"d1"}`+"\n"+`{"_id":"d1"}`), `corpus.jsonl:2: repeated _id "d1"`},
		{"bad score", with("qrels/test.tsv", "q1\td1\t1\nq1\td2\thigh\n"), `test.tsv:2: score "high" is not an integer`},
		{"two columns", with("qrels/test.tsv", "q1\td1\n"), "want 3 tab-separated columns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeDataset(t, tt.files))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestScanLinesLimit(t *testing.T) {
	dir := writeDataset(t, map[string]string{"f.jsonl": "short\n" + strings.Repeat("x", 5000) + "\n"})
	var lines int
	err := scanLinesMax(filepath.Join(dir, "f.jsonl"), 4096, func([]byte) error { lines++; return nil })
	if err == nil || !strings.Contains(err.Error(), "token too long") || lines != 1 {
		t.Fatalf("after %d lines: error = %v, want token too long", lines, err)
	}
}
