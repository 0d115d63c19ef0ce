package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// runCLI runs the CLI in process with the given environment.
func runCLI(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, lookup: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}}
	err = run(context.Background(), env, args)
	return out.String(), errb.String(), err
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name     string
		vars     map[string]string
		args     []string
		exit     int
		stdout   string
		stderr   string
		notInAny string
	}{
		{name: "version", args: []string{"version"}, stdout: "mcpsearch "},
		{name: "help", args: []string{"--help"}, stderr: "Commands:"},
		{name: "no command", args: nil, exit: 2, stderr: "Usage"},
		{name: "unknown", args: []string{"frobnicate"}, exit: 2},
		{name: "serve help", args: []string{"serve", "--help"}, exit: 2, stderr: "MCP_web_search_searxng_url"},
		{name: "config redacts", vars: map[string]string{"MCP_embed_api_key": "sk-very-secret", "DATABASE_URL": "postgres://u:pw-secret@h/db"},
			args: []string{"config"}, stdout: "MCP_web_search_max_results=5", notInAny: "secret"},
		{name: "bad env names the variable", vars: map[string]string{"MCP_web_search_timeout_ms": "fast"}, args: []string{"serve"},
			exit: 2, notInAny: "panic"},
		{name: "exposed without keys", args: []string{"serve", "--transport", "http", "--addr", "0.0.0.0:0", "--docs-enabled=false"}, exit: 2},
		{name: "ingest needs a conversation", args: []string{"ingest", "x.pdf"}, exit: 2},
		{name: "eval needs a dataset", args: []string{"eval"}, exit: 2},
		{name: "audit needs a command", args: []string{"audit"}, exit: 2},
		{name: "migrate needs a database", args: []string{"migrate"}, exit: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := runCLI(t, tt.vars, tt.args...)
			code := 0
			if err != nil {
				code = exitCode(err)
			}
			if code != tt.exit {
				t.Errorf("exit %d (%v), want %d", code, err, tt.exit)
			}
			if !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stdout %q / stderr %q, want %q / %q", out, errOut, tt.stdout, tt.stderr)
			}
			if tt.notInAny != "" && (strings.Contains(out, tt.notInAny) || strings.Contains(errOut, tt.notInAny) || (err != nil && strings.Contains(err.Error(), tt.notInAny))) {
				t.Errorf("output shows %q", tt.notInAny)
			}
		})
	}
	_, _, err := runCLI(t, map[string]string{"MCP_web_search_timeout_ms": "fast"}, "serve")
	if err == nil || !strings.Contains(err.Error(), "MCP_web_search_timeout_ms") {
		t.Errorf("bad value error %v does not name the variable", err)
	}
}

func TestMigrateIngestEval(t *testing.T) {
	db := pgtest.NewEmptyDatabase(t)
	vars := map[string]string{"DATABASE_URL": db}
	_, _, err := runCLI(t, vars, "ingest", "--conversation", "c", "main_test.go")
	if err == nil || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("ingest before migrate: %v, want a hint to run migrate", err)
	}
	for i, want := range []string{"applied 001", "up to date"} {
		out, _, err := runCLI(t, vars, "migrate")
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("migrate #%d: %q %v", i+1, out, err)
		}
	}

	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.md"), []byte("# Alpha\n\nThe answer to the E1047 puzzle is forty-two."), 0o644)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("Beta file about tomatoes."), 0o644)
	os.WriteFile(filepath.Join(dir, "skip.bin"), []byte{0, 1, 2}, 0o644)
	os.Mkdir(filepath.Join(dir, ".hidden"), 0o755)
	os.WriteFile(filepath.Join(dir, ".hidden", "c.txt"), []byte("hidden"), 0o644)
	out, errOut, err := runCLI(t, vars, "ingest", "--conversation", "cli", dir)
	if err != nil || !strings.Contains(out, "2 files (0 failed)") || !strings.Contains(errOut, "ready") {
		t.Fatalf("ingest: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	out, _, err = runCLI(t, vars, "ingest", "--conversation", "cli", filepath.Join(dir, "a.md"))
	if err != nil || !strings.Contains(out, "1 files (0 failed)") {
		t.Fatalf("re-ingest: %v %s", err, out)
	}

	out, _, err = runCLI(t, vars, "eval", "--dataset", filepath.Join("..", "..", "docs", "eval", "testdata", "minibeir"))
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	t.Logf("eval on minibeir:\n%s", out)
	// The local embedder and BM25 are deterministic, so these floors sit
	// just under what the modes measure (0.806, 0.688, 0.823): a change to
	// ranking or fusion that loses quality fails here.
	for mode, floor := range map[string]float64{"hybrid": 0.78, "vector": 0.65, "keyword": 0.80} {
		m := regexp.MustCompile(`\|\s*` + mode + `\s*\|\s*([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s row in:\n%s", mode, out)
		}
		if ndcg, _ := strconv.ParseFloat(m[1], 64); ndcg < floor {
			t.Errorf("%s nDCG@10 = %.3f, want at least %.2f", mode, ndcg, floor)
		}
	}
	// A judged query over the length limit is cut to it, counted, and the
	// table is finished; --run writes the ranked lists.
	ds := t.TempDir()
	os.Mkdir(filepath.Join(ds, "qrels"), 0o755)
	os.WriteFile(filepath.Join(ds, "corpus.jsonl"), []byte(`{"_id":"d1","title":"","text":"Tomatoes ripen in the sun."}
{"_id":"d2","title":"","text":"Servers restart after kernel upgrades."}
`), 0o644)
	long := strings.Repeat("tomatoes ", 300) // 2,700 characters
	os.WriteFile(filepath.Join(ds, "queries.jsonl"), []byte(`{"_id":"q1","text":"ripe tomatoes"}
{"_id":"q2","text":"`+long+`"}
{"_id":"q3","text":"kernel upgrades"}
`), 0o644)
	os.WriteFile(filepath.Join(ds, "qrels", "test.tsv"), []byte("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\nq3\td2\t1\n"), 0o644)
	runFile := filepath.Join(t.TempDir(), "out.run")
	out, _, err = runCLI(t, vars, "eval", "--dataset", ds, "--modes", "keyword", "--run", runFile)
	if err != nil {
		t.Fatalf("eval with a long query: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`\|\s*keyword\s*\|\s*1\.0000\s*\|`).MatchString(out) || !strings.Contains(out, "1 queries longer than 2000 characters were cut") {
		t.Errorf("eval with a long query:\n%s", out)
	}
	run, err := os.ReadFile(runFile)
	if err != nil || !strings.Contains(string(run), "q2 Q0 d1 1 ") || !strings.Contains(string(run), "q3 Q0 d2 1 ") {
		t.Errorf("run file %q, %v; want TREC lines for every query", run, err)
	}

	// The scratch conversation is removed afterwards.
	out, _, _ = runCLI(t, vars, "audit", "tail", "-n", "3")
	if !strings.Contains(out, "TOOL") {
		t.Errorf("audit tail header missing: %q", out)
	}
	if _, _, err := runCLI(t, vars, "audit", "prune", "--older-than", "soon"); err == nil || !errors.As(err, new(usageError)) {
		t.Errorf("prune with a bad age: %v", err)
	}
	out, _, err = runCLI(t, vars, "audit", "prune", "--older-than", "30d")
	if err != nil || !strings.Contains(out, "deleted 0") {
		t.Errorf("prune: %q %v", out, err)
	}
}
