// Package eval measures retrieval quality on BEIR-format datasets: it loads a
// corpus, queries and relevance judgements, runs every judged query through a
// Searcher and reports nDCG@10, Recall@10, MRR@10 and latency. It knows
// nothing of storage: the caller indexes Corpus its own way and supplies the
// search function.
package eval

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Dataset is a BEIR test collection.
type Dataset struct {
	// Corpus holds the documents in file order.
	Corpus []Doc
	// Queries holds the queries that have at least one judged-relevant
	// document (relevance > 0), in file order. Others cannot be scored.
	Queries []Query
	// Qrels maps query ID to document ID to graded relevance, as in the
	// qrels file (including judgements of 0 and for unknown documents).
	Qrels map[string]map[string]int
}

// Doc is one corpus document.
type Doc struct {
	ID    string
	Title string
	Text  string
}

// Query is one test query.
type Query struct {
	ID   string
	Text string
}

// maxLine bounds one JSON line; BEIR corpora hold documents far longer than
// bufio.Scanner's 64 KiB default.
const maxLine = 64 << 20

// QrelsFile is the judgement file Load reads, relative to the dataset folder.
const QrelsFile = "qrels/test.tsv"

// Load reads a BEIR dataset from dir: corpus.jsonl (objects with "_id",
// "title" and "text"; other keys are ignored), queries.jsonl ("_id" and
// "text") and qrels/test.tsv ("query-id", "corpus-id", "score" separated by
// tabs, with or without that header line; four-column TREC lines
// "qid 0 docid score" are accepted too). Each file may instead be gzipped
// with a ".gz" suffix. IDs may be JSON strings or numbers.
func Load(dir string) (*Dataset, error) {
	ds := &Dataset{}
	var err error
	if ds.Qrels, err = loadQrels(filepath.Join(dir, filepath.FromSlash(QrelsFile))); err != nil {
		return nil, err
	}
	err = readJSONL(filepath.Join(dir, "corpus.jsonl"), func(id string, rec jsonRecord) {
		ds.Corpus = append(ds.Corpus, Doc{ID: id, Title: rec.Title, Text: rec.Text})
	})
	if err != nil {
		return nil, err
	}
	err = readJSONL(filepath.Join(dir, "queries.jsonl"), func(id string, rec jsonRecord) {
		if judgedRelevant(ds.Qrels[id]) {
			ds.Queries = append(ds.Queries, Query{ID: id, Text: rec.Text})
		}
	})
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// judgedRelevant reports whether a query's judgements name any relevant document.
func judgedRelevant(rel map[string]int) bool {
	for _, r := range rel {
		if r > 0 {
			return true
		}
	}
	return false
}

type jsonRecord struct {
	ID    json.RawMessage `json:"_id"`
	Title string          `json:"title"`
	Text  string          `json:"text"`
}

// readJSONL calls add for each record of a JSON-lines file, rejecting
// missing and repeated IDs.
func readJSONL(path string, add func(id string, rec jsonRecord)) error {
	seen := make(map[string]struct{})
	return scanLines(path, func(line []byte) error {
		var rec jsonRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return err
		}
		id, err := jsonID(rec.ID)
		if err != nil {
			return err
		}
		if _, dup := seen[id]; dup {
			return fmt.Errorf("repeated _id %q", id)
		}
		seen[id] = struct{}{}
		add(id, rec)
		return nil
	})
}

// jsonID reads an "_id" given as a string or, in some exports, a number.
func jsonID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	var id string
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", errors.New(`missing "_id"`)
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &id); err != nil {
			return "", fmt.Errorf("_id: %w", err)
		}
	default:
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("_id is neither string nor number: %s", raw)
		}
		id = n.String()
	}
	if strings.TrimSpace(id) == "" {
		return "", errors.New(`empty "_id"`)
	}
	return id, nil
}

// loadQrels reads a judgement file. A first line whose score column is not
// an integer is taken as the header.
func loadQrels(path string) (map[string]map[string]int, error) {
	qrels := make(map[string]map[string]int)
	first := true
	err := scanLines(path, func(line []byte) error {
		fields := strings.Split(strings.TrimRight(string(line), "\r"), "\t")
		if len(fields) == 1 {
			fields = strings.Fields(fields[0])
		}
		var q, d, s string
		switch len(fields) {
		case 3:
			q, d, s = fields[0], fields[1], fields[2]
		case 4:
			q, d, s = fields[0], fields[2], fields[3]
		default:
			return fmt.Errorf("want 3 tab-separated columns (query-id, corpus-id, score), got %d", len(fields))
		}
		q, d, s = strings.TrimSpace(q), strings.TrimSpace(d), strings.TrimSpace(s)
		score, err := strconv.Atoi(s)
		if err != nil {
			if first {
				first = false
				return nil
			}
			return fmt.Errorf("score %q is not an integer", s)
		}
		first = false
		if q == "" || d == "" {
			return errors.New("empty query or corpus id")
		}
		if qrels[q] == nil {
			qrels[q] = make(map[string]int)
		}
		qrels[q][d] = score
		return nil
	})
	return qrels, err
}

// scanLines calls fn for each non-blank line of path, or of path+".gz" when
// only the gzipped file exists. Errors name the file and line.
func scanLines(path string, fn func(line []byte) error) error {
	return scanLinesMax(path, maxLine, fn)
}

// scanLinesMax is scanLines with lines limited to limit bytes.
func scanLinesMax(path string, limit int, fn func(line []byte) error) error {
	r, name, err := open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(limit, 1<<20)), limit)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

// open opens path, falling back to a gzipped path+".gz".
func open(path string) (io.ReadCloser, string, error) {
	f, err := os.Open(path)
	if err == nil {
		return f, path, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, path, err
	}
	gz, gzErr := os.Open(path + ".gz")
	if gzErr != nil {
		// Report the plain name: it is the one users expect.
		return nil, path, err
	}
	zr, err := gzip.NewReader(gz)
	if err != nil {
		gz.Close()
		return nil, path + ".gz", fmt.Errorf("read %s.gz: %w", path, err)
	}
	return gzipFile{zr, gz}, path + ".gz", nil
}

// gzipFile closes both the decompressor and the file under it.
type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g gzipFile) Close() error {
	return errors.Join(g.Reader.Close(), g.f.Close())
}
