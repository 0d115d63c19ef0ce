package server

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// explainArgs says, in the tool's own words, why args do not fit the
// tool's input schema and what to send instead. The SDK refuses such calls
// before a handler runs; its message names JSON pointers and echoes whole
// values, which helps no model. ok is false when no reason is found here.
func explainArgs(sc *jsonschema.Schema, args json.RawMessage) (msg string, ok bool) {
	if sc == nil {
		return "", false
	}
	var m map[string]json.RawMessage
	if len(args) == 0 || string(args) == "null" {
		m = map[string]json.RawMessage{}
	} else if err := json.Unmarshal(args, &m); err != nil {
		return "the arguments must be a JSON object", true
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range sc.Properties {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		if _, known := sc.Properties[name]; !known {
			return fmt.Sprintf("unknown argument %q: the arguments are %s", clip(name, 40), strings.Join(names, ", ")), true
		}
	}
	for _, name := range sc.Required {
		if _, sent := m[name]; !sent {
			return fmt.Sprintf("%s is required: send %s", name, sc.Properties[name].Description), true
		}
	}
	for _, name := range names {
		raw, sent := m[name]
		if !sent {
			continue
		}
		if msg, ok := explainValue(name, sc.Properties[name], raw); ok {
			return msg, true
		}
	}
	return "", false
}

// explainValue checks one argument against its property schema.
func explainValue(name string, p *jsonschema.Schema, raw json.RawMessage) (string, bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Sprintf("%s is not valid JSON", name), true
	}
	want := p.Type
	if want == "" {
		for _, t := range p.Types {
			if t != "null" {
				want = t
			}
		}
	}
	if v == nil {
		if slices.Contains(p.Types, "null") {
			return "", false
		}
		return fmt.Sprintf("%s is null: send %s %s, or leave it out", name, article(want), want), true
	}
	switch x := v.(type) {
	case string:
		if want != "string" {
			return fmt.Sprintf("%s must be %s %s, not a string", name, article(want), want), true
		}
		n := utf8.RuneCountInString(x)
		if p.MinLength != nil && n < *p.MinLength {
			return fmt.Sprintf("%s is empty: send %s", name, p.Description), true
		}
		if p.MaxLength != nil && n > *p.MaxLength {
			return fmt.Sprintf("%s has %d characters: send at most %d", name, n, *p.MaxLength), true
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, any(x)) {
			return fmt.Sprintf("unknown %s %q: send %s", name, clip(x, 40), oneOf(p.Enum)), true
		}
	case float64:
		if want != "integer" && want != "number" {
			return fmt.Sprintf("%s must be %s %s, not a number", name, article(want), want), true
		}
		if want == "integer" && x != float64(int64(x)) {
			return fmt.Sprintf("%s must be an integer, not %v", name, x), true
		}
		if (p.Minimum != nil && x < *p.Minimum) || (p.Maximum != nil && x > *p.Maximum) {
			return fmt.Sprintf("%s %v is out of range: send %s", name, x, rangeOf(p)), true
		}
	case []any:
		if want != "array" {
			return fmt.Sprintf("%s must be %s %s, not a list", name, article(want), want), true
		}
		if p.MaxItems != nil && len(x) > *p.MaxItems {
			return fmt.Sprintf("%s has %d values: send at most %d", name, len(x), *p.MaxItems), true
		}
		if it := p.Items; it != nil {
			for _, e := range x {
				s, isStr := e.(string)
				if it.Type == "string" && !isStr {
					return fmt.Sprintf("%s must be a list of strings", name), true
				}
				if len(it.Enum) > 0 && !slices.Contains(it.Enum, any(s)) {
					return fmt.Sprintf("unknown %s value %q: send one or more of %s", name, clip(s, 40), oneOf(it.Enum)), true
				}
			}
		}
	case bool:
		if want != "boolean" {
			return fmt.Sprintf("%s must be %s %s, not true or false", name, article(want), want), true
		}
	case map[string]any:
		if want != "object" {
			return fmt.Sprintf("%s must be %s %s, not an object", name, article(want), want), true
		}
		return explainObject(name, p, x)
	}
	return "", false
}

// explainObject checks the properties of an object argument (add_document's
// crawl), naming them as crawl.delay_ms, and the entries of a map
// (crawl.headers["Cookie"]).
func explainObject(name string, p *jsonschema.Schema, x map[string]any) (string, bool) {
	if p.MaxProperties != nil && len(x) > *p.MaxProperties {
		return fmt.Sprintf("%s has %d entries: send at most %d", name, len(x), *p.MaxProperties), true
	}
	for _, k := range slices.Sorted(maps.Keys(x)) {
		sub, known := p.Properties[k]
		where := name + "." + k
		if !known {
			sub = p.AdditionalProperties
			where = fmt.Sprintf("%s[%q]", name, clip(k, 40))
			switch {
			case sub == nil:
				continue
			case sub.Not != nil:
				// additionalProperties: false
				return fmt.Sprintf("unknown argument %s: %s takes %s", where, name, strings.Join(slices.Sorted(maps.Keys(p.Properties)), ", ")), true
			}
		}
		raw, err := json.Marshal(x[k])
		if err != nil {
			continue
		}
		if msg, ok := explainValue(where, sub, raw); ok {
			return msg, true
		}
	}
	return "", false
}

func rangeOf(p *jsonschema.Schema) string {
	num := func(f *float64) string { return strconv.FormatFloat(*f, 'g', -1, 64) }
	switch {
	case p.Minimum != nil && p.Maximum != nil:
		return num(p.Minimum) + " to " + num(p.Maximum)
	case p.Minimum != nil:
		return "at least " + num(p.Minimum)
	default:
		return "at most " + num(p.Maximum)
	}
}

// oneOf lists allowed values as "a, b or c", leaving out "" (the default).
func oneOf(values []any) string {
	var s []string
	for _, v := range values {
		if str := fmt.Sprint(v); str != "" {
			s = append(s, str)
		}
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func article(typ string) string {
	if typ == "integer" || typ == "array" || typ == "object" {
		return "an"
	}
	return "a"
}

// clip shortens s to n runes for a message.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "..."
}
