package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/embed/hub"
)

// TestPullProgress checks both displays of a pull: on a terminal a bar
// redrawn in place and ended by a newline; elsewhere one line per file as
// it completes, files resumed from an earlier attempt included.
func TestPullProgress(t *testing.T) {
	snap := hub.Snapshot{Files: []hub.File{{Name: "config.json", Size: 200}, {Name: "tokenizer.json", Size: 800}, {Name: "model.safetensors", Size: 3000}}}
	steps := []hub.Progress{{File: "config.json", Done: 200, Total: 4000}, {File: "tokenizer.json", Done: 600, Total: 4000},
		{File: "tokenizer.json", Done: 1000, Total: 4000}, {File: "model.safetensors", Done: 2500, Total: 4000}}
	tests := []struct {
		name  string
		tty   bool
		ok    bool
		want  []string
		lines int
	}{
		{"terminal", true, true, []string{"\r\033[K[###.....................] tokenizer.json", "\r\033[K[###############.........] model.safetensors 0.0 MB of 0.0 MB"}, 1},
		{"pipe", false, true, []string{"  config.json", "  tokenizer.json", "  model.safetensors"}, 3},
		{"pipe, failed", false, false, []string{"  config.json", "  tokenizer.json"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			p := newPullProgress(&b, tt.tty, snap)
			for _, s := range steps {
				p.update(s)
			}
			p.finish(tt.ok)
			out := b.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%q", w, out)
				}
			}
			if n := strings.Count(out, "\n"); n != tt.lines {
				t.Errorf("%d lines, want %d:\n%q", n, tt.lines, out)
			}
			if !tt.tty && strings.Contains(out, "\r") {
				t.Errorf("a bar on a pipe:\n%q", out)
			}
			if !tt.ok && strings.Contains(out, "model.safetensors") {
				t.Errorf("a failed file listed as done:\n%q", out)
			}
		})
	}
}

// TestReembedProgress checks the reembed display on a terminal and on a
// pipe: an announcement once there is work, the bar or a line, and the
// last state always shown.
func TestReembedProgress(t *testing.T) {
	for _, tty := range []bool{true, false} {
		var b bytes.Buffer
		p := &reembedProgress{w: &b, tty: tty, model: "m"}
		for _, s := range [][2]int{{0, 0}, {0, 40}, {10, 40}, {20, 40}, {40, 40}} {
			p.update(s[0], s[1])
		}
		p.finish()
		out := b.String()
		if strings.Count(out, "reembed: moving 40 chunks to m") != 1 || !strings.Contains(out, "[########################] chunks 40/40") || !strings.HasSuffix(out, "\n") {
			t.Errorf("tty %v:\n%q", tty, out)
		}
		if tty != strings.Contains(out, "\r\033[K") {
			t.Errorf("tty %v: redraws %v:\n%q", tty, !tty, out)
		}
	}
	var b bytes.Buffer
	p := &reembedProgress{w: &b, model: "m"}
	p.update(0, 0)
	p.finish()
	if b.Len() != 0 {
		t.Errorf("nothing to move, yet: %q", b.String())
	}
}
