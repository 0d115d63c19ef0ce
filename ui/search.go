package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Search results as search_docs returns them: what an agent reads.
type (
	searchOutput struct {
		Chunks []searchHit `json:"chunks"`
		More   []string    `json:"more_chunk_ids"`
	}
	searchHit struct {
		ChunkID    string   `json:"chunk_id"`
		FileID     string   `json:"file_id"`
		FileName   string   `json:"file_name"`
		Content    string   `json:"content"`
		Similarity float64  `json:"similarity"`
		Score      float64  `json:"score"`
		Source     string   `json:"source"`
		Location   location `json:"location"`
	}
	location struct {
		Citation string `json:"citation"`
		OCR      bool   `json:"ocr"`
	}
	chunkOutput struct {
		ChunkID  string `json:"chunk_id"`
		Content  string `json:"content"`
		Metadata struct {
			FileID    string   `json:"file_id"`
			FileName  string   `json:"file_name"`
			Source    string   `json:"source"`
			CharStart int      `json:"char_start"`
			CharEnd   int      `json:"char_end"`
			Location  location `json:"location"`
		} `json:"metadata"`
		ChunkIDs  []string `json:"chunk_ids"`
		Truncated bool     `json:"truncated"`
	}
)

// searchForm is the playground's form.
type searchForm struct {
	Conversation, Query, Mode, TopK, Threshold string
}

func (u *UI) searchPage(w http.ResponseWriter, r *http.Request, s session) {
	f := searchForm{Conversation: strings.TrimSpace(r.FormValue("conversation")), Query: strings.TrimSpace(r.FormValue("q")),
		Mode: r.FormValue("mode"), TopK: strings.TrimSpace(r.FormValue("top_k")), Threshold: strings.TrimSpace(r.FormValue("threshold"))}
	if f.Conversation == "" && len(s.p.Conversations) == 1 {
		f.Conversation = s.p.Conversations[0]
	}
	data := map[string]any{"Form": f, "Choices": u.conversationChoices(r, s), "Modes": []string{"hybrid", "vector", "keyword"},
		"Budget": u.b.Features().Playground}
	if f.Query != "" {
		args := map[string]any{"query": f.Query}
		if f.Conversation != "" {
			args["conversation_id"] = f.Conversation
		}
		if f.Mode != "" {
			args["mode"] = f.Mode
		}
		bad := ""
		if f.TopK != "" {
			n, err := strconv.Atoi(f.TopK)
			if err != nil {
				bad = fmt.Sprintf("top_k must be a whole number from 1 to 50, not %q.", f.TopK)
			}
			args["top_k"] = n
		}
		if f.Threshold != "" {
			t, err := strconv.ParseFloat(f.Threshold, 64)
			if err != nil {
				bad = fmt.Sprintf("The threshold must be a number from 0 to 1, such as 0.3, not %q.", f.Threshold)
			}
			args["threshold"] = t
		}
		if bad != "" {
			data["Error"] = bad
		} else {
			tc, err := u.b.Call(r.Context(), s.p, "search_docs", args)
			if err != nil {
				u.fail(w, r, s, err)
				return
			}
			data["Call"] = tc
			if tc.Failed {
				data["Error"] = tc.Error
			} else {
				var out searchOutput
				if err := json.Unmarshal(tc.Structured, &out); err != nil {
					u.fail(w, r, s, fmt.Errorf("search_docs result: %w", err))
					return
				}
				data["Result"] = out
			}
		}
	}
	u.render(w, r, http.StatusOK, "search", s, "Search playground", data)
}

// chunkNeighbours is how many chunks before and after the chunk page
// shows with it.
const chunkNeighbours = 1

func (u *UI) chunkPage(w http.ResponseWriter, r *http.Request, s session) {
	id := r.PathValue("id")
	tc, err := u.b.Call(r.Context(), s.p, "get_chunk", map[string]any{"chunk_id": id, "before": chunkNeighbours, "after": chunkNeighbours})
	if err != nil {
		u.fail(w, r, s, err)
		return
	}
	data := map[string]any{"Call": tc, "ID": id, "Back": localBack(r.FormValue("back"))}
	if tc.Failed {
		data["Error"] = tc.Error
	} else {
		var out chunkOutput
		if err := json.Unmarshal(tc.Structured, &out); err != nil {
			u.fail(w, r, s, fmt.Errorf("get_chunk result: %w", err))
			return
		}
		data["Chunk"] = out
		// The chunk found is marked among its neighbours by its own
		// text, read here: no text of a document travels in a URL.
		hit := ""
		if c, err := u.b.Chunk(r.Context(), s.p, id); err == nil {
			hit = c.Content
		}
		data["Parts"] = markHit(out.Content, hit)
	}
	u.render(w, r, http.StatusOK, "chunk", s, "Chunk "+id, data)
}

// localBack keeps a "back to the results" link on the page.
func localBack(p string) string {
	if p == "" {
		return ""
	}
	return localPath(p)
}

// passagePart is a piece of a merged passage; Hit marks the chunk that
// was found.
type passagePart struct {
	Text string
	Hit  bool
}

// markHit splits a passage around the first occurrence of hit (the start
// of the chunk found), so that the page can mark it among its neighbours.
func markHit(passage, hit string) []passagePart {
	hit = strings.TrimSpace(hit)
	i := -1
	if hit != "" {
		i = strings.Index(passage, hit)
	}
	if i < 0 {
		return []passagePart{{Text: passage}}
	}
	return []passagePart{{Text: passage[:i]}, {Text: hit, Hit: true}, {Text: passage[i+len(hit):]}}
}
