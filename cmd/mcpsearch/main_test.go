package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
)

// runCLI runs the CLI in process with the given environment.
func runCLI(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	env := &environment{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, environ: environ}
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
		{name: "help", args: []string{"--help"}, stdout: "Commands:"},
		{name: "no command", args: nil, exit: 2, stderr: "Usage"},
		{name: "unknown", args: []string{"frobnicate"}, exit: 2},
		{name: "serve help", args: []string{"serve", "--help"}, stdout: "MCP_web_search_searxng_url"},
		{name: "config redacts", vars: map[string]string{"MCP_embed_api_key": "sk-very-secret", "DATABASE_URL": "postgres://u:pw-secret@h/db",
			"MCP_auth_client_id": "mcpsearch", "MCP_auth_client_secret": "client-secret-value"},
			args: []string{"config"}, stdout: "MCP_web_search_max_results=5", notInAny: "-secret"},
		{name: "bad env names the variable", vars: map[string]string{"MCP_web_search_timeout_ms": "fast"}, args: []string{"serve"},
			exit: 2, notInAny: "panic"},
		{name: "exposed without keys", args: []string{"serve", "--transport", "http", "--addr", "0.0.0.0:0", "--docs-enabled=false"}, exit: 2},
		{name: "ingest needs a conversation", args: []string{"ingest", "x.pdf"}, exit: 2},
		{name: "eval needs a dataset", args: []string{"eval"}, exit: 2},
		{name: "audit needs a command", args: []string{"audit"}, exit: 2},
		{name: "migrate needs a database", args: []string{"migrate"}, exit: 2},
		{name: "misspelt variable warns", vars: map[string]string{"MCP_web_search_timout_ms": "5"}, args: []string{"config"},
			stderr: "did you mean MCP_web_search_timeout_ms?"},
		{name: "rate limit of an unknown tool", vars: map[string]string{"MCP_web_serch_rate_limit_burst": "3"}, args: []string{"config"}, exit: 2},
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
	_, _, err := runCLI(t, map[string]string{"MCP_web_serch_rate_limit_burst": "3"}, "config")
	if err == nil || !strings.Contains(err.Error(), `unknown tool "web_serch"`) {
		t.Errorf("a rate limit of an unknown tool gave %v, want an error naming the tool", err)
	}
	_, _, err = runCLI(t, map[string]string{"MCP_web_search_timeout_ms": "fast"}, "serve")
	if err == nil || !strings.Contains(err.Error(), "MCP_web_search_timeout_ms") {
		t.Errorf("bad value error %v does not name the variable", err)
	}
}

// TestHelp checks that every command answers --help on stdout with status
// 0, lists the settings it reads and no others, and refuses flags it does
// not take with status 2.
func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		// want are flags the help lists; not are flags it must not.
		want, not []string
	}{
		{args: []string{"serve", "--help"}, want: []string{"-transport", "-searxng-url", "-database-url", "-rate-limit", "-embed-provider"}},
		{args: []string{"serve", "-h"}, want: []string{"-transport"}},
		{args: []string{"config", "--help"}, want: []string{"-transport", "-api-keys"}},
		{args: []string{"migrate", "--help"}, want: []string{"-database-url"}, not: []string{"-transport", "-searxng-url", "-embed-provider", "-chunk-size"}},
		{args: []string{"ingest", "--help"}, want: []string{"-conversation", "-database-url", "-embed-provider", "-embed-model", "-chunk-size", "-chunk-overlap", "-workers", "-max-file-mb"},
			not: []string{"-transport", "-searxng-url", "-api-keys", "-rate-limit"}},
		{args: []string{"reembed", "--help"}, want: []string{"-database-url", "-embed-provider", "-log-level"}, not: []string{"-transport", "-chunk-size"}},
		{args: []string{"index", "--help"}, want: []string{"-database-url", "-embed-provider", "-index-build-memory-mb"}, not: []string{"-transport", "-chunk-size"}},
		{args: []string{"eval", "--help"}, want: []string{"-dataset", "-modes", "-keep", "-database-url", "-embed-provider", "-chunk-size", "-vector-weight"},
			not: []string{"-transport", "-searxng-url", "-api-keys"}},
		{args: []string{"audit", "--help"}, want: []string{"audit tail", "audit prune"}, not: []string{"-database-url"}},
		{args: []string{"audit", "-h"}, want: []string{"audit tail"}},
		{args: []string{"audit", "tail", "--help"}, want: []string{"-n ", "-database-url"}, not: []string{"-transport", "-embed-provider"}},
		{args: []string{"audit", "prune", "--help"}, want: []string{"-older-than", "-database-url"}, not: []string{"-transport", "-n "}},
		{args: []string{"models", "--help"}, want: []string{"models pull", "models list"}, not: []string{"-embed-provider"}},
		{args: []string{"models", "pull", "--help"}, want: []string{"-embed-model ", "-embed-models-dir", "-embed-model-dir", "-hub-url", "-hub-token"},
			not: []string{"-database-url", "-embed-api-key", "-transport"}},
		{args: []string{"models", "list", "--help"}, want: []string{"-embed-provider", "-embed-models-dir", "-embed-model-dir"}, not: []string{"-database-url", "-hub-url"}},
		{args: []string{"help", "models", "pull"}, want: []string{"-hub-url"}},
		{args: []string{"version", "--help"}, want: []string{"mcpsearch version"}, not: []string{"-database-url", "Flags"}},
		{args: []string{"help", "ingest"}, want: []string{"-conversation"}},
		{args: []string{"help", "audit", "prune"}, want: []string{"-older-than"}},
		{args: []string{"help"}, want: []string{"Commands:"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// A database URL in the environment must not make help connect.
			out, errOut, err := runCLI(t, map[string]string{"DATABASE_URL": "postgres://u:pw@127.0.0.1:1/db"}, tt.args...)
			if err != nil || errOut != "" {
				t.Fatalf("err %v, stderr %q; want success and an empty stderr", err, errOut)
			}
			if !strings.HasPrefix(out, "Usage: mcpsearch") {
				t.Errorf("help does not start with a usage line:\n%s", out)
			}
			if tt.args[0] != "help" && !strings.Contains(out, "Example:") {
				t.Errorf("help has no example:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("help lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("help shows %q:\n%s", n, out)
				}
			}
		})
	}
}

func TestBadFlagsAreUsageErrors(t *testing.T) {
	tests := [][]string{
		{"serve", "--bogus"},
		{"migrate", "--bogus"},
		{"migrate", "--searxng-url", "http://x"}, // a flag of serve only
		{"version", "--bogus"},
		{"version", "extra"},
		{"migrate", "extra"},
		{"audit", "tail", "--embed-provider", "local"},
		{"audit", "tail", "extra"},
		{"audit", "prune", "--older-than", "30d", "--chunk-size", "500"},
		{"ingest", "--conversation", "c", "--transport", "http", "x.pdf"},
		{"eval", "--dataset", "d", "extra"},
		{"config", "--bogus"},
		{"reembed", "--bogus"},
		{"audit", "frobnicate"},
		{"models"},
		{"models", "frobnicate"},
		{"models", "list", "extra"},
		{"models", "list", "--database-url", "postgres://h/db"},
		{"models", "pull", "--chunk-size", "500"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, _, err := runCLI(t, nil, args...)
			if err == nil || exitCode(err) != 2 {
				t.Fatalf("err %v (exit %d), want a usage error", err, exitCode(err))
			}
			if strings.Contains(out, "Usage") {
				t.Errorf("help went to stdout after a mistake: %q", out)
			}
		})
	}
}

// TestCommandSettingsExist catches a command listing a setting flag that
// config does not define.
func TestCommandSettingsExist(t *testing.T) {
	names := []string{"audit tail", "audit prune", "models pull", "models list"}
	for _, c := range commands() {
		names = append(names, c.name)
	}
	for _, name := range names {
		cfg := config.Default()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %v", name, r)
				}
			}()
			fs := newFlagSet(name, &cfg)
			for _, s := range helpFor(name).settings {
				if s != allSettings[0] && fs.Lookup(s) == nil {
					t.Errorf("%s: flag --%s missing", name, s)
				}
			}
		}()
	}
	// A setting flag keeps parsing into the configuration.
	cfg := config.Default()
	fs := newFlagSet("ingest", &cfg)
	if err := fs.Parse([]string{"--chunk-size", "500", "--database-url", "postgres://h/db"}); err != nil || cfg.ChunkSize != 500 || cfg.DatabaseURL != "postgres://h/db" {
		t.Errorf("parse: %v, chunk size %d, database %q", err, cfg.ChunkSize, cfg.DatabaseURL)
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
	// Not on a terminal: the files skipped, and one line for the rest.
	if err != nil || !strings.Contains(out, "2 ingested, 0 already present, 0 failed, 2 skipped") || strings.Contains(errOut, "ready") ||
		!strings.Contains(errOut, "skipped "+filepath.Join(dir, "skip.bin")) {
		t.Fatalf("ingest: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	out, _, err = runCLI(t, vars, "ingest", "--conversation", "cli", filepath.Join(dir, "a.md"))
	if err != nil || !strings.Contains(out, "0 ingested, 1 already present, 0 failed, 0 skipped") {
		t.Fatalf("re-ingest: %v %s", err, out)
	}

	out, _, err = runCLI(t, vars, "eval", "--dataset", filepath.Join("..", "..", "docs", "eval", "testdata", "minibeir"))
	if err != nil {
		t.Fatalf("eval: %v\n%s", err, out)
	}
	t.Logf("eval on minibeir:\n%s", out)
	for _, want := range []string{"embedder local-hash-v1-384 (384 dimensions); hybrid vector weight 0.01 (auto); default threshold 0.17",
		"vector best hits judged relevant: 18,", "vector best hits not relevant:    10,"} {
		if !strings.Contains(out, want) {
			t.Errorf("eval output lacks %q", want)
		}
	}
	ndcg := func(out, row string) float64 {
		t.Helper()
		m := regexp.MustCompile(`\|\s*` + regexp.QuoteMeta(row) + `\s*\|\s*([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %s row in:\n%s", row, out)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	// The local embedder and BM25 are deterministic, so these floors sit
	// just under what the modes measure (0.823, 0.688, 0.823): a change to
	// ranking or fusion that loses quality fails here. With the hashing
	// embedder hybrid search must not rank below keyword search.
	for mode, floor := range map[string]float64{"hybrid": 0.80, "vector": 0.65, "keyword": 0.80} {
		if v := ndcg(out, mode); v < floor {
			t.Errorf("%s nDCG@10 = %.3f, want at least %.2f", mode, v, floor)
		}
	}
	if h, k := ndcg(out, "hybrid"), ndcg(out, "keyword"); h < k-0.005 {
		t.Errorf("hybrid nDCG@10 %.4f is below keyword's %.4f", h, k)
	}

	// A sweep of the hybrid weight: one row per weight, 0 being keyword
	// search's order.
	out, _, err = runCLI(t, vars, "eval", "--dataset", filepath.Join("..", "..", "docs", "eval", "testdata", "minibeir"), "--modes", "hybrid,keyword",
		"--vector-weight", "0,auto,1")
	if err != nil {
		t.Fatalf("eval sweep: %v\n%s", err, out)
	}
	if !strings.Contains(out, "hybrid vector weight 0, 0.01 (auto), 1;") || ndcg(out, "hybrid w=0") != ndcg(out, "keyword") ||
		ndcg(out, "hybrid w=auto") != ndcg(out, "keyword") || ndcg(out, "hybrid w=1") >= ndcg(out, "keyword") {
		t.Errorf("eval sweep:\n%s", out)
	}
	if _, _, err := runCLI(t, vars, "eval", "--dataset", "d", "--vector-weight", "0.1,11"); err == nil || exitCode(err) != 2 {
		t.Errorf("eval with a weight over 10: %v, want a usage error", err)
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

func TestBuildVersion(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "bed75bf0a1b2c3d4e5f60718293a4b5c6d7e8f90"}}
	tests := []struct {
		name string
		set  string
		info *debug.BuildInfo
		want string
	}{
		{"set at build time", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "v1.2.3"},
		{"module version", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{"revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "false"})}, "dev-bed75bf0a1b2"},
		{"dirty revision", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})}, "dev-bed75bf0a1b2-dirty"},
		{"short revision", "dev", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "dev-abc"},
		{"nothing stamped", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "dev", nil, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildVersion(tt.set, tt.info); got != tt.want {
				t.Errorf("buildVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAuditDatabaseAdvice checks that the audit commands say what to fix
// about the database instead of showing an SQL error.
func TestAuditDatabaseAdvice(t *testing.T) {
	empty := pgtest.NewEmptyDatabase(t)
	u, err := url.Parse(empty)
	if err != nil || u.User == nil {
		t.Skipf("DATABASE_URL is not a URL with a user; cannot derive a wrong password")
	}
	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), "not-the-password")
	refused := *u
	refused.Host = closedport.Reserve(t).Addr()
	tests := []struct {
		name     string
		url      string
		want     string
		not      string
		exitCode int
	}{
		{"not migrated", empty, "run `mcpsearch migrate` first", "SQLSTATE", 1},
		{"wrong password", wrong.String(), "check the user and password in DATABASE_URL", "unavailable", 1},
		{"nothing listening", refused.String(), "is PostgreSQL running", "password", 1},
	}
	for _, tt := range tests {
		for _, args := range [][]string{{"audit", "tail"}, {"audit", "prune", "--older-than", "30d"}} {
			t.Run(tt.name+"/"+args[1], func(t *testing.T) {
				out, _, err := runCLI(t, map[string]string{"DATABASE_URL": tt.url}, args...)
				if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), tt.not) {
					t.Fatalf("err %v, want one saying %q and not %q", err, tt.want, tt.not)
				}
				if exitCode(err) != tt.exitCode || out != "" {
					t.Errorf("exit %d, stdout %q", exitCode(err), out)
				}
			})
		}
	}
}
