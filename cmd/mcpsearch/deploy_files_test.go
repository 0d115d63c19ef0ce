package main

// Readers for the deployment files, so that the tests can take the command,
// environment and files of a container from docker-compose.yml and the
// Dockerfile themselves instead of repeating them. The module has no YAML
// dependency, so parseYAML reads the subset of YAML those files use and
// rejects everything else with an error that names the line: a change to
// the compose file that needs more makes the tests fail loudly, never
// read it wrong.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// yamlLine is one physical line of a YAML document.
type yamlLine struct {
	num    int    // 1-based
	indent int    // leading spaces
	text   string // the line without its indentation
}

type yamlParser struct {
	lines []yamlLine
	pos   int
}

// parseYAML parses block mappings, block sequences, flow sequences of
// scalars, plain, single- and double-quoted scalars and comments. Scalars
// stay strings (Compose reads them so too, apart from a few numeric keys
// these tests do not use). Maps are map[string]any, sequences []any.
func parseYAML(src string) (any, error) {
	p := &yamlParser{}
	for i, l := range strings.Split(src, "\n") {
		l = strings.TrimRight(l, " \r")
		text := strings.TrimLeft(l, " ")
		if strings.HasPrefix(text, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", i+1)
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if text == "---" || text == "..." || strings.HasPrefix(text, "%") {
			return nil, fmt.Errorf("line %d: document markers and directives are not supported", i+1)
		}
		p.lines = append(p.lines, yamlLine{num: i + 1, indent: len(l) - len(text), text: text})
	}
	if len(p.lines) == 0 {
		return nil, nil
	}
	v, err := p.node(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.lines) {
		l := p.lines[p.pos]
		return nil, fmt.Errorf("line %d: unexpected %q", l.num, l.text)
	}
	return v, nil
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

// node parses the block that starts at the current line, whose indentation
// must be at least min.
func (p *yamlParser) node(min int) (any, error) {
	if p.pos >= len(p.lines) || p.lines[p.pos].indent < min {
		return nil, nil
	}
	l := p.lines[p.pos]
	if isSeqItem(l.text) {
		return p.sequence(l.indent)
	}
	return p.mapping(l.indent)
}

func (p *yamlParser) mapping(indent int) (map[string]any, error) {
	m := map[string]any{}
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent < indent {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.num)
		}
		if isSeqItem(l.text) {
			return nil, fmt.Errorf("line %d: a sequence item where a mapping key was expected", l.num)
		}
		key, rest, ok, err := splitKey(l.text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.num, err)
		}
		if !ok {
			return nil, fmt.Errorf("line %d: want KEY: VALUE, got %q", l.num, l.text)
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %q", l.num, key)
		}
		p.pos++
		if rest != "" {
			v, err := scalar(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", l.num, err)
			}
			m[key] = v
			continue
		}
		var v any
		switch {
		case p.pos < len(p.lines) && p.lines[p.pos].indent > indent:
			v, err = p.node(indent + 1)
		case p.pos < len(p.lines) && p.lines[p.pos].indent == indent && isSeqItem(p.lines[p.pos].text):
			// A sequence may sit at its key's indentation.
			v, err = p.sequence(indent)
		}
		if err != nil {
			return nil, err
		}
		m[key] = v
	}
	return m, nil
}

func (p *yamlParser) sequence(indent int) ([]any, error) {
	var s []any
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.indent < indent || (l.indent == indent && !isSeqItem(l.text)) {
			break
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation", l.num)
		}
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		if rest == "" || strings.HasPrefix(rest, "#") {
			p.pos++
			v, err := p.node(indent + 1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
			continue
		}
		if _, _, isMap, err := splitKey(rest); err != nil {
			return nil, fmt.Errorf("line %d: %w", l.num, err)
		} else if isMap {
			// "- key: value" opens a mapping indented where key starts;
			// the line is reread as that mapping's first line.
			p.lines[p.pos] = yamlLine{num: l.num, indent: l.indent + len(l.text) - len(rest), text: rest}
			v, err := p.mapping(p.lines[p.pos].indent)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
			continue
		}
		v, err := scalar(rest)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.num, err)
		}
		s = append(s, v)
		p.pos++
	}
	return s, nil
}

// splitKey splits "key: value" (value may be empty). ok is false when text
// is not a mapping entry.
func splitKey(text string) (key, rest string, ok bool, err error) {
	if text[0] == '"' || text[0] == '\'' {
		end, err := quotedEnd(text)
		if err != nil {
			return "", "", false, err
		}
		after := text[end:]
		if !strings.HasPrefix(after, ":") || (len(after) > 1 && after[1] != ' ') {
			return "", "", false, nil
		}
		k, err := scalar(text[:end])
		if err != nil {
			return "", "", false, err
		}
		return k.(string), strings.TrimSpace(after[1:]), true, nil
	}
	i := strings.Index(text, ": ")
	if strings.HasSuffix(text, ":") && (i < 0 || i == len(text)-1) {
		i = len(text) - 1
	}
	if i < 0 {
		return "", "", false, nil
	}
	if c := strings.Index(text, " #"); c >= 0 && c < i {
		return "", "", false, nil
	}
	if strings.ContainsAny(text[:1], "[{&*!|>'\"%@`") {
		return "", "", false, nil
	}
	return strings.TrimSpace(text[:i]), strings.TrimSpace(text[i+1:]), true, nil
}

// quotedEnd returns the index just past the quoted scalar text starts with.
func quotedEnd(text string) (int, error) {
	q := text[0]
	for i := 1; i < len(text); i++ {
		switch {
		case q == '"' && text[i] == '\\':
			i++
		case q == '\'' && text[i] == '\'' && i+1 < len(text) && text[i+1] == '\'':
			i++
		case text[i] == q:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated quoted scalar %s", text)
}

// scalar parses a scalar or a flow sequence of scalars, with an optional
// trailing comment.
func scalar(text string) (any, error) {
	switch text[0] {
	case '"', '\'':
		end, err := quotedEnd(text)
		if err != nil {
			return nil, err
		}
		if tail := strings.TrimSpace(text[end:]); tail != "" && !strings.HasPrefix(tail, "#") {
			return nil, fmt.Errorf("text after quoted scalar: %q", tail)
		}
		if text[0] == '\'' {
			return strings.ReplaceAll(text[1:end-1], "''", "'"), nil
		}
		var s string
		// YAML's double-quoted escapes used here (\\, \", \n, \t, \uXXXX)
		// are JSON's.
		if err := json.Unmarshal([]byte(text[:end]), &s); err != nil {
			return nil, fmt.Errorf("double-quoted scalar %s: %w", text[:end], err)
		}
		return s, nil
	case '[':
		return flowSequence(text)
	case '{', '&', '*', '!', '|', '>', '%', '@', '`':
		return nil, fmt.Errorf("%q: flow mappings, anchors, aliases, tags and block scalars are not supported", text)
	}
	if c := strings.Index(text, " #"); c >= 0 {
		text = text[:c]
	}
	text = strings.TrimSpace(text)
	if strings.Contains(text, ": ") {
		return nil, fmt.Errorf("%q: plain scalars may not contain \": \"", text)
	}
	return text, nil
}

func flowSequence(text string) ([]any, error) {
	var out []any
	rest := strings.TrimSpace(text[1:])
	for {
		if strings.HasPrefix(rest, "]") {
			if tail := strings.TrimSpace(rest[1:]); tail != "" && !strings.HasPrefix(tail, "#") {
				return nil, fmt.Errorf("text after flow sequence: %q", tail)
			}
			return out, nil
		}
		if rest == "" {
			return nil, fmt.Errorf("unterminated flow sequence %s", text)
		}
		var item string
		if rest[0] == '"' || rest[0] == '\'' {
			end, err := quotedEnd(rest)
			if err != nil {
				return nil, err
			}
			item, rest = rest[:end], strings.TrimSpace(rest[end:])
		} else {
			end := strings.IndexAny(rest, ",]")
			if end < 0 {
				return nil, fmt.Errorf("unterminated flow sequence %s", text)
			}
			item, rest = strings.TrimSpace(rest[:end]), rest[end:]
			if item == "" || strings.ContainsAny(item[:1], "[{") {
				return nil, fmt.Errorf("flow sequence %s: nested or empty items are not supported", text)
			}
		}
		v, err := scalar(item)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if strings.HasPrefix(rest, ",") {
			rest = strings.TrimSpace(rest[1:])
		} else if !strings.HasPrefix(rest, "]") {
			return nil, fmt.Errorf("flow sequence %s: want , or ] after %s", text, item)
		}
	}
}

// interpolateRE matches what Compose interpolates: $$, ${NAME...} and
// $NAME.
var interpolateRE = regexp.MustCompile(`\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)((:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*)|\{)`)

// interpolate expands the variables of one compose value as Compose does,
// looking them up in vars (the .env file): ${NAME}, $NAME, ${NAME:-default},
// ${NAME-default}, ${NAME:?error}, ${NAME?error}, ${NAME:+alt},
// ${NAME+alt}, and $$ for a dollar.
func interpolate(s string, vars map[string]string) (string, error) {
	var errs []string
	out := interpolateRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := interpolateRE.FindStringSubmatch(m)
		name, op, arg := sub[2], sub[4], sub[5]
		switch {
		case sub[1] == "$":
			return "$"
		case sub[1] == "{":
			errs = append(errs, fmt.Sprintf("invalid interpolation in %q", s))
			return m
		case sub[6] != "":
			name = sub[6]
		}
		v, set := vars[name]
		empty := v == ""
		switch op {
		case "":
			return v
		case ":-":
			if empty {
				return arg
			}
		case "-":
			if !set {
				return arg
			}
		case ":?", "?":
			if !set || (op == ":?" && empty) {
				errs = append(errs, fmt.Sprintf("required variable %s is missing a value: %s", name, arg))
			}
		case ":+":
			if !empty {
				return arg
			}
			return ""
		case "+":
			if set {
				return arg
			}
			return ""
		}
		return v
	})
	if errs != nil {
		return "", fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// interpolateAll applies interpolate to every string under v, the way
// Compose interpolates every value (not the keys) of the file.
func interpolateAll(v any, vars map[string]string) (any, error) {
	switch v := v.(type) {
	case string:
		return interpolate(v, vars)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = interpolateAll(e, vars); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			var err error
			if out[k], err = interpolateAll(e, vars); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		return out, nil
	}
	return v, nil
}

// readEnvFile reads a Compose .env file: KEY=VALUE lines, # comments,
// values optionally quoted.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s line %d: want KEY=VALUE", path, i+1)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vars[strings.TrimSpace(k)] = v
	}
	return vars, nil
}

// compose is a parsed, interpolated docker-compose.yml.
type compose struct {
	services map[string]composeService
	volumes  map[string]any
}

// composeService holds the keys of a service these tests read.
type composeService struct {
	raw         map[string]any
	image       string
	build       string
	user        string
	entrypoint  []string
	command     []string
	environment map[string]string
	ports       []string
	volumes     []string
	dependsOn   map[string]string // service -> condition
}

// loadCompose reads docker-compose.yml from the repository root and
// interpolates it with vars.
func loadCompose(vars map[string]string) (compose, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		return compose{}, err
	}
	doc, err := parseYAML(string(b))
	if err != nil {
		return compose{}, fmt.Errorf("docker-compose.yml: %w", err)
	}
	if doc, err = interpolateAll(doc, vars); err != nil {
		return compose{}, fmt.Errorf("docker-compose.yml: %w", err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return compose{}, fmt.Errorf("docker-compose.yml: not a mapping")
	}
	c := compose{services: map[string]composeService{}}
	c.volumes, _ = top["volumes"].(map[string]any)
	services, ok := top["services"].(map[string]any)
	if !ok {
		return compose{}, fmt.Errorf("docker-compose.yml: no services")
	}
	for name, v := range services {
		m, ok := v.(map[string]any)
		if !ok {
			return compose{}, fmt.Errorf("service %s: not a mapping", name)
		}
		s := composeService{raw: m, environment: map[string]string{}, dependsOn: map[string]string{}}
		s.image, _ = m["image"].(string)
		s.build, _ = m["build"].(string)
		s.user, _ = m["user"].(string)
		if s.entrypoint, err = stringList(m["entrypoint"]); err != nil {
			return compose{}, fmt.Errorf("service %s entrypoint: %w", name, err)
		}
		if s.command, err = stringList(m["command"]); err != nil {
			return compose{}, fmt.Errorf("service %s command: %w", name, err)
		}
		if s.ports, err = stringList(m["ports"]); err != nil {
			return compose{}, fmt.Errorf("service %s ports: %w", name, err)
		}
		if s.volumes, err = stringList(m["volumes"]); err != nil {
			return compose{}, fmt.Errorf("service %s volumes: %w", name, err)
		}
		switch env := m["environment"].(type) {
		case nil:
		case map[string]any:
			for k, v := range env {
				s.environment[k], _ = v.(string)
			}
		case []any:
			for _, kv := range env {
				k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
				s.environment[k] = v
			}
		default:
			return compose{}, fmt.Errorf("service %s environment: want a mapping or a list", name)
		}
		switch deps := m["depends_on"].(type) {
		case nil:
		case map[string]any:
			for dep, v := range deps {
				cond, _ := v.(map[string]any)
				s.dependsOn[dep], _ = cond["condition"].(string)
			}
		case []any:
			for _, dep := range deps {
				s.dependsOn[fmt.Sprint(dep)] = "service_started"
			}
		}
		c.services[name] = s
	}
	return c, nil
}

// stringList reads a compose list, which may also be written as one string
// (split on spaces, as Compose does for command and entrypoint).
func stringList(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		out := make([]string, len(v))
		for i, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d is not a string", i)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list, got %T", v)
}

// dockerStage is one stage of the Dockerfile.
type dockerStage struct {
	name       string
	from       string
	args       map[string]string // ARG defaults
	env        []string          // KEY=VALUE
	user       string
	entrypoint []string
	cmd        []string
	copies     [][]string // arguments of each COPY
	runs       []string
	expose     []string
}

// loadDockerfile reads the Dockerfile's stages. ENTRYPOINT and CMD must be
// in exec (JSON) form, the only form that passes arguments unchanged.
func loadDockerfile() ([]dockerStage, error) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		return nil, err
	}
	var stages []dockerStage
	globalArgs := map[string]string{}
	var logical []string
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\") + " ")
			continue
		}
		cur.WriteString(t)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	for _, l := range logical {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			f := strings.Fields(rest)
			st := dockerStage{from: f[0], args: map[string]string{}}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if instr == "ARG" {
				k, v, _ := strings.Cut(rest, "=")
				globalArgs[k] = v
				continue
			}
			return nil, fmt.Errorf("Dockerfile: %s before FROM", instr)
		}
		st := &stages[len(stages)-1]
		switch instr {
		case "ARG":
			k, v, _ := strings.Cut(rest, "=")
			st.args[k] = v
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				if !strings.Contains(kv, "=") {
					return nil, fmt.Errorf("Dockerfile: ENV %s: use the KEY=VALUE form", rest)
				}
				st.env = append(st.env, kv)
			}
		case "USER":
			st.user = rest
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				return nil, fmt.Errorf("Dockerfile: %s %s: use the exec form [\"...\"]: %w", instr, rest, err)
			}
			if instr == "ENTRYPOINT" {
				st.entrypoint = argv
				// As in Docker, a new ENTRYPOINT resets an inherited CMD.
				st.cmd = nil
			} else {
				st.cmd = argv
			}
		case "COPY":
			st.copies = append(st.copies, strings.Fields(rest))
		case "RUN":
			st.runs = append(st.runs, rest)
		case "EXPOSE":
			st.expose = append(st.expose, strings.Fields(rest)...)
		}
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("Dockerfile: no FROM")
	}
	return stages, nil
}

func TestParseYAML(t *testing.T) {
	tests := []struct {
		name, src string
		want      string // JSON of the result
		err       string
	}{
		{"mapping", "a: 1\nb: two # comment\n", `{"a":"1","b":"two"}`, ""},
		{"nested", "a:\n  b:\n    c: x\n  d: y\n", `{"a":{"b":{"c":"x"},"d":"y"}}`, ""},
		{"sequence", "a:\n  - x\n  - \"y z\"\n  - 'it''s'\n", `{"a":["x","y z","it's"]}`, ""},
		{"sequence at key indent", "a:\n- x\n- y\nb: z\n", `{"a":["x","y"],"b":"z"}`, ""},
		{"flow", `a: ["x", "y, z", w]`, `{"a":["x","y, z","w"]}`, ""},
		{"sequence of mappings", "a:\n  - k: 1\n    l: 2\n  - k: 3\n", `{"a":[{"k":"1","l":"2"},{"k":"3"}]}`, ""},
		{"escapes", `a: "x\"y\\z"`, `{"a":"x\"y\\z"}`, ""},
		{"colon in plain", "a: http://x:8080/p\nb: 127.0.0.1:1:2\n", `{"a":"http://x:8080/p","b":"127.0.0.1:1:2"}`, ""},
		{"empty value", "a:\nb: c\n", `{"a":null,"b":"c"}`, ""},
		{"plain with colon space", "a: b: c\n", "", "may not contain"},
		{"anchor", "a: &x b\n", "", "anchors"},
		{"block scalar", "a: |\n  x\n", "", "block scalars"},
		{"flow mapping", "a: {b: c}\n", "", "flow mappings"},
		{"duplicate", "a: 1\na: 2\n", "", "duplicate key"},
		{"bad indent", "a: 1\n  b: 2\n", "", "unexpected indentation"},
		{"unterminated", `a: "x`, "", "unterminated"},
		{"tab", "a:\n\tb: 1\n", "", "tab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseYAML(tt.src)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseYAML = %v, %v; want error containing %q", v, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(v)
			if string(got) != tt.want {
				t.Errorf("parseYAML = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestInterpolate(t *testing.T) {
	vars := map[string]string{"SET": "v", "EMPTY": ""}
	tests := []struct {
		in, want, err string
	}{
		{"a${SET}b", "avb", ""},
		{"a$SET", "av", ""},
		{"$$SET", "$SET", ""},
		{"${UNSET}", "", ""},
		{"${UNSET:-d}", "d", ""},
		{"${EMPTY:-d}", "d", ""},
		{"${EMPTY-d}", "", ""},
		{"${SET:-d}", "v", ""},
		{"${SET:?boom}", "v", ""},
		{"${EMPTY?boom}", "", ""},
		{"${SET:+alt}", "alt", ""},
		{"${EMPTY+alt}", "alt", ""},
		{"${UNSET+alt}", "", ""},
		{"${UNSET:?say why}", "", "required variable UNSET is missing a value: say why"},
		{"${EMPTY:?say why}", "", "required variable EMPTY"},
		{"${bad name}", "", "invalid interpolation"},
	}
	for _, tt := range tests {
		got, err := interpolate(tt.in, vars)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("interpolate(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
