package searxng

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Response is SearXNG's answer to one search. Every part may be empty.
type Response struct {
	// Query is the query SearXNG searched for.
	Query string
	// Results are the search results in SearXNG's ranking order. Results
	// without a URL are left out. SearXNG merges identical URLs, but
	// variants of one page (and, on some instances, exact repeats) occur.
	Results []Result
	// Answers are direct answers (calculators, definitions, ...).
	Answers []Answer
	// Corrections are spelling corrections of the query.
	Corrections []string
	// Infoboxes are summary boxes, typically from Wikipedia or Wikidata.
	Infoboxes []Infobox
	// Suggestions are related queries.
	Suggestions []string
	// UnresponsiveEngines lists engines that failed for this search. When
	// Results is empty and this is not, the instance's engines are failing
	// rather than the query matching nothing.
	UnresponsiveEngines []UnresponsiveEngine
}

// Result is one search result.
type Result struct {
	URL     string
	Title   string
	Content string // snippet; empty when the engine sent none
	// Engine is the engine credited first. Engines lists every engine that
	// returned the URL; when SearXNG sends only one of the two, the other is
	// filled in from it.
	Engine   string
	Engines  []string
	Score    float64 // SearXNG's ranking score; 0 when absent
	Category string
	// PublishedDate is the publication date as SearXNG sent it (usually
	// ISO 8601), or empty.
	PublishedDate string
}

// Answer is a direct answer to the query.
type Answer struct {
	Answer string
	URL    string
	Engine string
}

// Infobox is a summary box about the query's subject.
type Infobox struct {
	Infobox    string // title
	ID         string
	Content    string
	Engine     string
	URLs       []Link
	Attributes []Attribute
}

// Link is a titled URL of an Infobox.
type Link struct {
	Title string
	URL   string
}

// Attribute is a labelled fact of an Infobox.
type Attribute struct {
	Label string
	Value string
}

// UnresponsiveEngine is an engine that failed for a search, with SearXNG's
// reason, such as "timeout" or "Suspended: too many requests".
type UnresponsiveEngine struct {
	Engine string
	Reason string
}

// decodeResponse parses a SearXNG JSON answer. Only the outer value must be
// a JSON object; every field is optional, unknown keys are ignored and
// values of an unexpected type are skipped rather than failing the search,
// because engines and SearXNG releases vary what they send.
func decodeResponse(body []byte) (*Response, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, errors.New("empty body")
	}
	if body[0] != '{' {
		return nil, errors.New("body is not a JSON object")
	}
	var w wireResponse
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &w); err != nil && !errors.As(err, &typeErr) {
		return nil, err
	}
	out := &Response{
		Query:       string(w.Query),
		Corrections: w.Corrections,
		Suggestions: w.Suggestions,
	}
	if len(w.Results) > 0 {
		out.Results = make([]Result, 0, len(w.Results))
		for _, r := range w.Results {
			if r.URL == "" {
				continue
			}
			res := Result{
				URL:           string(r.URL),
				Title:         string(r.Title),
				Content:       string(r.Content),
				Engine:        string(r.Engine),
				Engines:       r.Engines,
				Score:         float64(r.Score),
				Category:      string(r.Category),
				PublishedDate: string(r.PublishedDate),
			}
			if res.Engine == "" && len(res.Engines) > 0 {
				res.Engine = res.Engines[0]
			}
			if len(res.Engines) == 0 && res.Engine != "" {
				res.Engines = []string{res.Engine}
			}
			out.Results = append(out.Results, res)
		}
	}
	for _, a := range w.Answers {
		if a.Answer != "" {
			out.Answers = append(out.Answers, Answer{Answer: string(a.Answer), URL: string(a.URL), Engine: string(a.Engine)})
		}
	}
	for _, ib := range w.Infoboxes {
		box := Infobox{
			Infobox: string(ib.Infobox),
			ID:      string(ib.ID),
			Content: string(ib.Content),
			Engine:  string(ib.Engine),
		}
		for _, l := range ib.URLs {
			if l.URL != "" {
				box.URLs = append(box.URLs, Link{Title: string(l.Title), URL: string(l.URL)})
			}
		}
		for _, a := range ib.Attributes {
			if a.Label != "" || a.Value != "" {
				box.Attributes = append(box.Attributes, Attribute{Label: string(a.Label), Value: string(a.Value)})
			}
		}
		if box.Infobox == "" && box.Content == "" && len(box.URLs) == 0 && len(box.Attributes) == 0 {
			continue
		}
		out.Infoboxes = append(out.Infoboxes, box)
	}
	for _, u := range w.UnresponsiveEngines {
		if u.Engine != "" {
			out.UnresponsiveEngines = append(out.UnresponsiveEngines, UnresponsiveEngine{Engine: string(u.Engine), Reason: string(u.Reason)})
		}
	}
	return out, nil
}

// The wire types mirror SearXNG's JSON. Their fields are plain slices and
// structs: decodeResponse ignores json.UnmarshalTypeError, with which
// encoding/json skips a value of the wrong type and still decodes the rest,
// so an array element that is not an object just stays zero and is dropped.

type wireResponse struct {
	Query               flexString               `json:"query"`
	Results             []wireResult             `json:"results"`
	Answers             []wireAnswer             `json:"answers"`
	Corrections         flexStrings              `json:"corrections"`
	Infoboxes           []wireInfobox            `json:"infoboxes"`
	Suggestions         flexStrings              `json:"suggestions"`
	UnresponsiveEngines []wireUnresponsiveEngine `json:"unresponsive_engines"`
}

type wireResult struct {
	URL           flexString  `json:"url"`
	Title         flexString  `json:"title"`
	Content       flexString  `json:"content"`
	Engine        flexString  `json:"engine"`
	Engines       flexStrings `json:"engines"`
	Score         flexFloat   `json:"score"`
	Category      flexString  `json:"category"`
	PublishedDate flexString  `json:"publishedDate"`
}

// wireAnswer accepts both shapes SearXNG has used: an object (current
// releases) or a bare string (older ones).
type wireAnswer struct {
	Answer flexString `json:"answer"`
	URL    flexString `json:"url"`
	Engine flexString `json:"engine"`
}

func (a *wireAnswer) UnmarshalJSON(b []byte) error {
	if !isObject(b) {
		var s flexString
		_ = s.UnmarshalJSON(b)
		*a = wireAnswer{Answer: s}
		return nil
	}
	type plain wireAnswer
	return json.Unmarshal(b, (*plain)(a))
}

type wireInfobox struct {
	Infobox    flexString      `json:"infobox"`
	ID         flexString      `json:"id"`
	Content    flexString      `json:"content"`
	Engine     flexString      `json:"engine"`
	URLs       []wireLink      `json:"urls"`
	Attributes []wireAttribute `json:"attributes"`
}

type wireLink struct {
	Title flexString `json:"title"`
	URL   flexString `json:"url"`
}

// wireAttribute keeps only textual values: Wikidata attributes sometimes
// carry an image object instead, which a text client cannot show.
type wireAttribute struct {
	Label flexString `json:"label"`
	Value flexString `json:"value"`
}

// wireUnresponsiveEngine decodes SearXNG's ["engine", "reason"] pairs, and
// {"engine": ..., "reason": ...} objects in case a release switches to them.
type wireUnresponsiveEngine struct {
	Engine flexString
	Reason flexString
}

func (u *wireUnresponsiveEngine) UnmarshalJSON(b []byte) error {
	switch {
	case isArray(b):
		var parts []flexString
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		if len(parts) > 0 {
			u.Engine = parts[0]
		}
		if len(parts) > 1 {
			u.Reason = parts[1]
		}
	case isObject(b):
		var o struct {
			Engine flexString `json:"engine"`
			Name   flexString `json:"name"`
			Reason flexString `json:"reason"`
			Error  flexString `json:"error"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		u.Engine, u.Reason = o.Engine, o.Reason
		if u.Engine == "" {
			u.Engine = o.Name
		}
		if u.Reason == "" {
			u.Reason = o.Error
		}
	default:
		var s flexString
		_ = s.UnmarshalJSON(b)
		u.Engine = s
	}
	return nil
}

// flexString reads a JSON string, number or boolean as text; null, objects
// and arrays read as "".
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		*s = ""
		return nil
	}
	switch b[0] {
	case '"':
		// Most strings have no escapes: slice them instead of running the
		// decoder again.
		if inner := b[1 : len(b)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			*s = flexString(inner)
			return nil
		}
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = flexString(v)
	case '{', '[', 'n':
		*s = ""
	default: // number, true, false
		*s = flexString(b)
	}
	return nil
}

// flexFloat reads a JSON number or a numeric string; anything else reads as 0.
type flexFloat float64

func (f *flexFloat) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*f = 0
	if len(b) == 0 {
		return nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
	}
	if v, err := strconv.ParseFloat(string(b), 64); err == nil {
		*f = flexFloat(v)
	}
	return nil
}

// flexStrings reads an array of strings, dropping empty and non-text
// elements; a single string reads as a one-element list; anything else as
// empty.
type flexStrings []string

func (ss *flexStrings) UnmarshalJSON(b []byte) error {
	*ss = nil
	switch {
	case isArray(b):
		var parts []flexString
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		for _, p := range parts {
			if p != "" {
				*ss = append(*ss, string(p))
			}
		}
	case len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] == '"':
		var s flexString
		if err := s.UnmarshalJSON(b); err != nil {
			return err
		}
		if s != "" {
			*ss = flexStrings{string(s)}
		}
	}
	return nil
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

func isArray(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '['
}
