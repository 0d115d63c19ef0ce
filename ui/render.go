package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// view is what every page's template receives.
type view struct {
	Title string
	// Nav is the menu entry of the page.
	Nav       string
	Principal Principal
	// SignedIn is set when the page has a caller; Open when the server
	// asks for no key.
	SignedIn, Open bool
	CSRF           string
	Features       Features
	Data           any
}

// pageNav is the menu entry each page belongs to.
var pageNav = map[string]string{
	"conversations": "conversations", "conversation": "conversations", "file": "conversations", "source": "conversations",
	"add": "add", "jobs": "jobs", "job": "jobs",
	"search": "search", "chunk": "search", "audit": "audit", "status": "status",
}

// parsePages parses each page with the layout and the shared pieces.
func parsePages(funcs template.FuncMap) (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "parts" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html", n)
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// render writes page with data, in the layout. It renders into a buffer
// first, so that a template error is answered as an error, not half a
// page.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, page string, s session, title string, data any) {
	v := view{Title: title, Nav: pageNav[page], Principal: s.p, Open: u.b.Open(), Data: data}
	if s.raw != "" {
		v.SignedIn, v.CSRF, v.Features = true, s.csrf(), u.b.Features()
	}
	var buf bytes.Buffer
	if err := u.pages[page].Execute(&buf, v); err != nil {
		u.log.Error("ui: render", "page", page, "error", err)
		http.Error(w, "the page could not be rendered; the server's log has the details", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (u *UI) funcs() template.FuncMap {
	return template.FuncMap{
		"asset": u.asset,
		// utc is a time as the page sends it: UTC in ISO 8601 for the
		// <time> element (the script shows it in the browser's zone), and
		// readable UTC for a page read without script.
		"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"utc":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"size": humanSize,
		"pretty": func(raw json.RawMessage) string {
			var b bytes.Buffer
			if len(raw) == 0 {
				return ""
			}
			if err := json.Indent(&b, raw, "", "  "); err != nil {
				return string(raw)
			}
			return b.String()
		},
		"path": func(parts ...string) string {
			var b strings.Builder
			b.WriteString(base)
			for _, p := range parts {
				b.WriteString("/" + url.PathEscape(p))
			}
			return b.String()
		},
		// query is a path with its query string, leaving out empty values:
		// query "/ui/jobs" "cursor" .Next "conversation" .Conv.
		"query": func(p string, kv ...string) string {
			q := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					q.Set(kv[i], kv[i+1])
				}
			}
			if len(q) == 0 {
				return p
			}
			return p + "?" + q.Encode()
		},
		"plural": func(n int, word string) string {
			if n == 1 {
				return fmt.Sprintf("%d %s", n, word)
			}
			return fmt.Sprintf("%d %ss", n, word)
		},
		"float":  func(f float64) string { return fmt.Sprintf("%.4f", f) },
		"float2": func(f float64) string { return fmt.Sprintf("%.2f", f) },
		"itoa":   strconv.Itoa,
		"hours": func(d time.Duration) string {
			if d%time.Hour == 0 {
				return plural(int(d/time.Hour), "hour")
			}
			return d.String()
		},
		"join": strings.Join,
		"add":  func(a, b int) int { return a + b },
		// args passes several values to a template: args "Job" . "CSRF" $.CSRF.
		"args": func(kv ...any) (map[string]any, error) {
			if len(kv)%2 != 0 {
				return nil, fmt.Errorf("args: odd number of values")
			}
			m := map[string]any{}
			for i := 0; i < len(kv); i += 2 {
				k, ok := kv[i].(string)
				if !ok {
					return nil, fmt.Errorf("args: key %v is not a string", kv[i])
				}
				m[k] = kv[i+1]
			}
			return m, nil
		},
	}
}

// humanSize writes a byte count as a person reads it.
func humanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
