package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolReference renders tools as the Markdown reference doc/tools.md embeds,
// so that the documentation is generated from the definitions themselves.
func ToolReference(tools []*mcp.Tool) string {
	var b strings.Builder
	for _, t := range tools {
		fmt.Fprintf(&b, "### `%s`\n\n%s\n\n", t.Name, t.Description)
		in := schemaOf(t.InputSchema)
		if len(in.Properties) > 0 {
			b.WriteString("| parameter | type | required | description |\n|---|---|---|---|\n")
			for _, name := range requiredFirst(in) {
				p := in.Properties[name]
				req := "no"
				for _, r := range in.Required {
					if r == name {
						req = "yes"
					}
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, p.typeName(), req, strings.ReplaceAll(p.Description, "|", "\\|"))
			}
			b.WriteString("\n")
		}
		out := schemaOf(t.OutputSchema)
		if len(out.Properties) > 0 {
			b.WriteString("Result fields (structured content): ")
			var fields []string
			for _, name := range sortedProps(out) {
				fields = append(fields, "`"+name+"` ("+out.Properties[name].typeName()+")")
			}
			b.WriteString(strings.Join(fields, ", "))
			b.WriteString(".\n\n")
		}
	}
	return b.String()
}

// ToolDifferences renders, for each tool whose text in other differs from
// base (the same tools described for another configuration), a section
// named after it and variant, saying intro and then the description and
// parameters as other has them.
func ToolDifferences(base, other []*mcp.Tool, variant, intro string) string {
	var b strings.Builder
	for _, o := range other {
		i := slices.IndexFunc(base, func(t *mcp.Tool) bool { return t.Name == o.Name })
		if i < 0 {
			continue
		}
		t := base[i]
		in, oin := schemaOf(t.InputSchema), schemaOf(o.InputSchema)
		var params []string
		for _, name := range requiredFirst(oin) {
			if p, ok := in.Properties[name]; !ok || p.Description != oin.Properties[name].Description {
				params = append(params, name)
			}
		}
		if o.Description == t.Description && len(params) == 0 {
			continue
		}
		fmt.Fprintf(&b, "### `%s` %s\n\n%s\n\n", o.Name, variant, intro)
		if o.Description != t.Description {
			fmt.Fprintf(&b, "%s\n\n", o.Description)
		}
		if len(params) > 0 {
			b.WriteString("| parameter | description |\n|---|---|\n")
			for _, name := range params {
				fmt.Fprintf(&b, "| `%s` | %s |\n", name, strings.ReplaceAll(oin.Properties[name].Description, "|", "\\|"))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// schema is the part of a JSON Schema the reference shows.
type schema struct {
	Type        any                `json:"type"`
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Required    []string           `json:"required"`
	Items       *schema            `json:"items"`
	order       []string
}

func schemaOf(v any) *schema {
	raw, err := json.Marshal(v)
	s := &schema{}
	if err != nil || json.Unmarshal(raw, s) != nil {
		return &schema{}
	}
	// Keep the order the Go struct declares, which the SDK preserves.
	var ordered struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &ordered) == nil && len(ordered.Properties) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(ordered.Properties)))
		depth := 0
		for {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			switch tok := tok.(type) {
			case json.Delim:
				if tok == '{' || tok == '[' {
					depth++
				} else {
					depth--
				}
			case string:
				if depth == 1 {
					s.order = append(s.order, tok)
					var skip json.RawMessage
					if dec.Decode(&skip) != nil {
						return s
					}
				}
			}
		}
	}
	return s
}

// requiredFirst lists required parameters before optional ones.
func requiredFirst(s *schema) []string {
	names := sortedProps(s)
	sort.SliceStable(names, func(i, j int) bool {
		return slices.Contains(s.Required, names[i]) && !slices.Contains(s.Required, names[j])
	})
	return names
}

func sortedProps(s *schema) []string {
	if len(s.order) == len(s.Properties) {
		return slices.Clone(s.order)
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *schema) typeName() string {
	var t string
	switch v := s.Type.(type) {
	case string:
		t = v
	case []any:
		var parts []string
		for _, p := range v {
			if p != "null" {
				parts = append(parts, fmt.Sprint(p))
			}
		}
		t = strings.Join(parts, "|")
	}
	if t == "array" && s.Items != nil {
		return "array of " + s.Items.typeName()
	}
	return t
}
