// Package config holds mcpsearch's one Config, loaded once from the
// environment names of the contract and overridden by command-line flags.
// No other package reads the environment.
//
// Every setting is one entry of settings (settings.go): its environment
// variable, flag, default, help and check. Loading, flags, validation,
// `mcpsearch config` and the table in doc/configuration.md are all read from that list.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// RateLimit is one tool's token bucket: PerMinute tokens refill per minute,
// up to Burst tokens held at once. PerMinute 0 disables limiting.
type RateLimit struct {
	PerMinute int
	Burst     int
	// Global, when above 0, is a ceiling of calls per minute on the tool
	// for all callers together, on top of each caller's own bucket.
	Global int
}

// Group names settings that some commands read: a command that reads a
// group takes every setting of it, so a new setting reaches them all
// through its entry alone.
type Group string

// setting is one setting of Config.
type setting struct {
	// env is the environment variable, flag the flag without dashes.
	env, flag string
	// def is the default, written as a user would set it; Default parses
	// it, and doc/configuration.md shows it.
	def string
	// help is the flag's help. doc is the description in doc/configuration.md, in
	// Markdown, where it says it differently; help otherwise.
	help, doc string
	// group is the group of commands besides serve that read the setting.
	group Group
	value value
	// check reports what is wrong with the setting given the whole
	// configuration, on top of value's own check.
	check func(c *Config) []string
	// more are table rows that follow this setting's.
	more string
}

// value binds a setting to its field of Config.
type value struct {
	// set parses a value from the environment or a flag into c.
	set func(c *Config, v string) error
	// get shows c's value, secrets redacted.
	get func(c *Config) string
	// check reports what is wrong with the value on its own.
	check func(c *Config) []string
	// boolean marks a switch, whose flag may stand alone (--stateless).
	boolean bool
}

// problems returns what is wrong with s in c.
func (s setting) problems(c *Config) []string {
	var out []string
	if s.value.check != nil {
		out = append(out, s.value.check(c)...)
	}
	if s.check != nil {
		out = append(out, s.check(c)...)
	}
	return out
}

// Default returns the configuration used when nothing is set: every
// setting's default.
func Default() Config {
	c := Config{RateLimits: map[string]RateLimit{}, BuiltinRateLimits: map[string]RateLimit{}}
	for tool, rl := range WriteToolRateLimits {
		c.BuiltinRateLimits[tool] = rl
	}
	for _, s := range settings() {
		if s.def == "" {
			continue
		}
		if err := s.value.set(&c, s.def); err != nil {
			// The defaults are this package's own: a failure is a bug
			// every test catches.
			panic(fmt.Sprintf("default of %s: %v", s.env, err))
		}
	}
	return c
}

// Flags returns the flag names of the settings of groups, for a command
// that reads those only.
func Flags(groups ...Group) []string {
	var out []string
	for _, s := range settings() {
		for _, g := range groups {
			if s.group == g {
				out = append(out, s.flag)
			}
		}
	}
	return out
}

// toolVar matches the per-tool settings MCP_<tool>_rate_limit_per_minute,
// MCP_<tool>_rate_limit_burst and MCP_<tool>_rate_limit_global_per_minute.
// Which tools exist is the server's to say: it refuses settings of a tool
// it does not have.
var toolVar = regexp.MustCompile(`^MCP_(\w+?)_rate_limit_(global_per_minute|per_minute|burst)$`)

// LoadEnv applies the environment (as os.Environ gives it) to c. An error
// names the variable and says what it should hold.
func (c *Config) LoadEnv(environ []string) error {
	env := parseEnviron(environ)
	var errs []error
	for _, s := range settings() {
		v, ok := env[s.env]
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		if err := s.value.set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: %w", s.env, err))
		}
	}
	if strings.TrimSpace(env["MCP_embed_models_dir"]) == "" {
		c.EmbedModelsDir = defaultModelsDir(env)
	}
	for _, name := range sortedKeys(env) {
		m := toolVar.FindStringSubmatch(name)
		if m == nil || strings.TrimSpace(env[name]) == "" {
			continue
		}
		tool := m[1]
		n, err := parseNonNegative(env[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("environment variable %s: %w", name, err))
			continue
		}
		rl, ok := c.RateLimits[tool]
		if !ok {
			rl = RateLimit{PerMinute: -1, Burst: -1}
		}
		switch m[2] {
		case "burst":
			rl.Burst = n
		case "global_per_minute":
			rl.Global = n
		default:
			rl.PerMinute = n
		}
		if c.RateLimits == nil {
			c.RateLimits = map[string]RateLimit{}
		}
		c.RateLimits[tool] = rl
	}
	return errors.Join(errs...)
}

// defaultModelsDir is the per-user folder of pulled models, following the
// XDG base directory convention: $XDG_DATA_HOME/mcpsearch/models, or
// ~/.local/share/mcpsearch/models. Empty without either variable (the
// models command then asks for MCP_embed_models_dir).
func defaultModelsDir(env map[string]string) string {
	if d := strings.TrimSpace(env["XDG_DATA_HOME"]); filepath.IsAbs(d) {
		return filepath.Join(d, "mcpsearch", "models")
	}
	if h := strings.TrimSpace(env["HOME"]); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "share", "mcpsearch", "models")
	}
	return ""
}

// parseEnviron turns KEY=VALUE lines into a map; the last value wins.
func parseEnviron(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// UnknownVars returns a warning for every MCP_* variable of environ that is
// no setting, naming the closest one, so a misspelt name does not pass
// silently. tools are the server's tools, whose per-tool settings exist.
func UnknownVars(environ []string, tools []string) []string {
	known := map[string]bool{}
	for _, s := range settings() {
		known[s.env] = true
	}
	for _, t := range tools {
		known["MCP_"+t+"_rate_limit_per_minute"] = true
		known["MCP_"+t+"_rate_limit_burst"] = true
		known["MCP_"+t+"_rate_limit_global_per_minute"] = true
	}
	var out []string
	for _, name := range sortedKeys(parseEnviron(environ)) {
		if !strings.HasPrefix(strings.ToUpper(name), "MCP_") || known[name] {
			continue
		}
		best, dist := "", -1
		for k := range known {
			if d := editDistance(strings.ToLower(name), strings.ToLower(k)); dist < 0 || d < dist || (d == dist && k < best) {
				best, dist = k, d
			}
		}
		w := fmt.Sprintf("environment variable %s is not a setting of mcpsearch and is ignored", name)
		if dist >= 0 && dist <= max(3, len(name)/4) {
			w += fmt.Sprintf("; did you mean %s?", best)
		}
		out = append(out, w)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// RegisterFlags defines a flag for every setting on fs, with the current
// values of c as defaults, so flags parsed after LoadEnv override the
// environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, s := range settings() {
		usage := fmt.Sprintf("%s (env %s, default %s)", s.help, s.env, s.value.get(c))
		if s.value.get(c) == "" {
			usage = fmt.Sprintf("%s (env %s)", s.help, s.env)
		}
		set := func(v string) error { return s.value.set(c, v) }
		if s.value.boolean {
			fs.BoolFunc(s.flag, usage, set)
		} else {
			fs.Func(s.flag, usage, set)
		}
	}
	fs.Func("rate-limit", "per-tool rate limit TOOL=PER_MINUTE[/BURST], repeatable (env MCP_<tool>_rate_limit_per_minute, MCP_<tool>_rate_limit_burst)", func(s string) error {
		tool, rl, err := parseToolRateLimit(s)
		if err != nil {
			return err
		}
		c.RateLimits[tool] = rl
		return nil
	})
}

// WritesOn reports whether anything may change the documents: uploads,
// deletions and the write tools; MCP_read_only turns them all off.
func (c *Config) WritesOn() bool { return !c.ReadOnly }

// WriteToolsOn reports whether the tools that change documents are
// offered: writes are on and MCP_docs_write_tools_enabled is not false.
func (c *Config) WriteToolsOn() bool { return c.WritesOn() && c.WriteToolsEnabled }

// WriteToolRateLimits are the default buckets of the tools that change
// documents: lower than the reads', since each call stores or deletes
// files. They are defaults like MCP_rate_limit_per_minute's:
// MCP_rate_limit_per_minute=0 turns them off with every other default, and
// MCP_<tool>_rate_limit_* override them as any tool's.
var WriteToolRateLimits = map[string]RateLimit{
	"add_document":    {PerMinute: 10, Burst: 3},
	"cancel_job":      {PerMinute: 20, Burst: 5},
	"delete_document": {PerMinute: 20, Burst: 5},
}

// RateLimitFor returns the bucket of one tool. What the operator set for
// the tool itself (MCP_<tool>_rate_limit_*) decides; what it leaves unset
// comes from the defaults: the tool's built-in bucket
// (BuiltinRateLimits) or MCP_rate_limit_per_minute's. A default of 0
// per minute turns every default off, built-in ones too, so that only a
// tool's own setting limits it then.
func (c *Config) RateLimitFor(tool string) RateLimit {
	rl := c.RateLimit
	if d, ok := c.BuiltinRateLimits[tool]; ok && rl.PerMinute > 0 {
		rl.PerMinute, rl.Burst = d.PerMinute, d.Burst
	}
	if o, ok := c.RateLimits[tool]; ok {
		if o.PerMinute >= 0 {
			rl.PerMinute = o.PerMinute
		}
		if o.Burst >= 0 {
			rl.Burst = o.Burst
		}
		if o.Global > 0 {
			rl.Global = o.Global
		}
	}
	return rl
}

// SharedRateLimits reports whether the token buckets are kept in the
// database, for every replica alike, rather than in this process: the
// postgres store, or auto with a database and an HTTP transport. Replicas
// are served over HTTP; a stdio process is its one client's, started by it,
// so auto keeps its buckets in memory: sharing them would only pay a round
// trip per call and make separate clients of one user spend one budget.
func (c *Config) SharedRateLimits() bool {
	switch c.RateLimitStore {
	case "postgres":
		return true
	case "auto":
		return c.DatabaseURL != "" && c.HTTP()
	}
	return false
}

// SearXNGURLs returns the configured SearXNG instances, in the order they
// are tried.
func (c *Config) SearXNGURLs() []string { return splitList(c.SearXNGURL) }

// HTTP reports whether any HTTP transport is configured.
func (c *Config) HTTP() bool {
	for _, t := range c.Transports {
		if t == "http" || t == "sse" {
			return true
		}
	}
	return false
}

// PublicBase is the URL clients reach the server at: MCP_public_url, or on
// a loopback listener with a fixed port http:// and its address; "" when
// it cannot be known.
func (c *Config) PublicBase() string {
	if c.PublicURL != "" {
		return c.PublicURL
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil || port == "0" || !loopbackHost(host) {
		return ""
	}
	return "http://" + c.Addr
}

// OAuth reports whether access tokens of an authorization server are
// accepted.
func (c *Config) OAuth() bool { return c.AuthIssuer != "" }

// Serves reports whether transport t is configured.
func (c *Config) Serves(t string) bool {
	for _, x := range c.Transports {
		if x == t {
			return true
		}
	}
	return false
}

// Validate checks the whole configuration and returns every problem at
// once, each naming the setting to change.
func (c *Config) Validate() error {
	var errs []error
	for _, s := range settings() {
		for _, p := range s.problems(c) {
			errs = append(errs, fmt.Errorf("%s (--%s): %s", s.env, s.flag, p))
		}
	}
	for _, tool := range sortedKeys(c.RateLimits) {
		if rl := c.RateLimitFor(tool); rl.PerMinute > 0 && rl.Burst < 1 {
			errs = append(errs, fmt.Errorf("MCP_%s_rate_limit_burst: want at least 1 when rate limiting is on, got %d", tool, rl.Burst))
		}
	}
	return errors.Join(errs...)
}

// Describe returns every setting as name, value pairs for `mcpsearch config`,
// with secrets redacted; tools are the server's tools.
func (c *Config) Describe(tools []string) [][2]string {
	var out [][2]string
	for _, s := range settings() {
		out = append(out, [2]string{s.env, s.value.get(c)})
	}
	for _, tool := range tools {
		rl := c.RateLimitFor(tool)
		out = append(out, [2]string{"MCP_" + tool + "_rate_limit_per_minute", strconv.Itoa(rl.PerMinute)})
		out = append(out, [2]string{"MCP_" + tool + "_rate_limit_burst", strconv.Itoa(rl.Burst)})
	}
	return out
}

// settingsTable renders the table of settings of doc/configuration.md, one row per entry.
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| environment | flag | default | meaning |\n|---|---|---|---|\n")
	for _, s := range settings() {
		def, doc := " ", s.doc
		if s.def != "" {
			def = " `" + s.def + "` "
		}
		if doc == "" {
			doc = s.help
		}
		fmt.Fprintf(&b, "| `%s` | `--%s` |%s| %s |\n", s.env, s.flag, def, strings.ReplaceAll(doc, "|", "\\|"))
		b.WriteString(s.more)
	}
	return b.String()
}

func parseTransports(v string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		switch p {
		case "stdio", "http", "sse":
		case "streamable_http", "streamable-http":
			p = "http"
		default:
			return nil, fmt.Errorf("unknown transport %q: want stdio, http, sse or http,sse", p)
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if seen["stdio"] && len(out) > 1 {
		return nil, errors.New("stdio cannot be combined with other transports: run one process per transport, or use http,sse")
	}
	return out, nil
}

func parseToolRateLimit(s string) (string, RateLimit, error) {
	tool, spec, ok := strings.Cut(s, "=")
	if !ok {
		return "", RateLimit{}, fmt.Errorf("want TOOL=PER_MINUTE[/BURST], got %q", s)
	}
	if tool = strings.TrimSpace(tool); tool == "" {
		return "", RateLimit{}, fmt.Errorf("want TOOL=PER_MINUTE[/BURST], got %q", s)
	}
	rl := RateLimit{Burst: -1}
	pm, burst, hasBurst := strings.Cut(spec, "/")
	n, err := parseNonNegative(pm)
	if err != nil {
		return "", RateLimit{}, fmt.Errorf("rate limit of %s: %w", tool, err)
	}
	rl.PerMinute = n
	if hasBurst {
		if rl.Burst, err = parseNonNegative(burst); err != nil {
			return "", RateLimit{}, fmt.Errorf("burst of %s: %w", tool, err)
		}
	}
	return tool, rl, nil
}

func parseNonNegative(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a whole number 0 or above, got %q", s)
	}
	return n, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
