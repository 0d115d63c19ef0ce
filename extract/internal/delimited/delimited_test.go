package delimited

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/extract/internal/textdoc"
)

func TestWiderThan(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       int
	}{
		{"narrow", "a,b,c\n1,2,3\n", 0},
		{"at the limit", "a,b,c,d\n", 0},
		{"past it on row 2", "a,b\n1,2,3,4,5\n", 2},
		{"commas in quotes", `"a,b,c,d,e",f` + "\n", 0},
		{"doubled quotes", `"a "",b,c,d,e",f` + "\n", 0},
		{"a quote inside a field", `a"b,c,d,e,f` + "\n", 1},
		{"a lazy quote in a quoted field", `"a "b,c,d,e",f` + "\n", 0},
		{"line ends in quotes", `"a` + "\n" + `b",c` + "\n" + `x,y,z,w,v`, 2},
		{"fields across lines", `"1` + "\n" + `","2` + "\n" + `","3` + "\n" + `","4` + "\n" + `","5"`, 1},
	} {
		if got := widerThan(c.text, ',', 4); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestReadRefusesWideRows(t *testing.T) {
	opts := textdoc.Options{MaxTextBytes: 1 << 30, ChunkSize: 1000}
	_, err := Read(context.Background(), "h\n"+strings.Repeat("a,", MaxColumns), ',', opts)
	if !errors.Is(err, textdoc.ErrTooLarge) || !strings.Contains(err.Error(), "row 2 holds more than 16384 columns (the column limit)") {
		t.Errorf("a row of %d columns: %v", MaxColumns+1, err)
	}
	if _, err := Read(context.Background(), "h\n"+strings.Repeat("a,", MaxColumns-1)+"a", ',', opts); err != nil {
		t.Errorf("a row of %d columns: %v", MaxColumns, err)
	}
}
