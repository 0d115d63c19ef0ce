package ooxml

import (
	"strconv"
	"testing"
)

// TestListCountersBounded checks that list numbers are kept only for the
// lists the numbering part defines: a body naming a million made-up lists
// must not make a million counters.
func TestListCountersBounded(t *testing.T) {
	r := &docx{counters: map[string][]int{}, numbering: numbering{
		abstract: map[string]map[int]numLevel{"7": {0: {format: "decimal", start: 1}}},
		override: map[string]map[int]numLevel{}}}
	for i := range 1000 {
		if m := r.marker("made-up-"+strconv.Itoa(i), 0); m != "-" {
			t.Fatalf("the marker of an undefined list: %q", m)
		}
	}
	if m := r.marker("7", 0) + r.marker("7", 0); m != "1.2." {
		t.Errorf("the markers of a numbered list: %q", m)
	}
	if len(r.counters) != 1 {
		t.Errorf("%d list counters, want 1 (the list defined)", len(r.counters))
	}
}
