package safetext

import (
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMessage(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain message", "plain message"},
		{"bad token \x00\x01 here", `bad token \x00\x01 here`},
		{"two\nlines\tand tab", "two lines and tab"},
		{"invalid \xff\xfe byte", "invalid \uFFFD byte"},
		{"override \u202e gnp.exe", `override \u202e gnp.exe`},
		{"C1 \u0085 control", `C1 \u0085 control`},
		{"accents é and emoji 😀 stay", "accents é and emoji 😀 stay"},
	}
	for _, tt := range tests {
		if got := Message(tt.in); got != tt.want {
			t.Errorf("Message(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := Message(strings.Repeat("é\x00", 5000))
	if len(long) > MaxMessageBytes || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("long message: %d bytes, valid %v, %q", len(long), utf8.ValidString(long), long[len(long)-10:])
	}
}

func TestError(t *testing.T) {
	if Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
	if err := Error(io.EOF); err != io.EOF {
		t.Errorf("a clean error was wrapped: %#v", err)
	}
	err := Error(errors.Join(io.ErrUnexpectedEOF, errors.New("token \x00\xff")))
	if !errors.Is(err, io.ErrUnexpectedEOF) || err.Error() != `unexpected EOF token \x00`+"\uFFFD" {
		t.Errorf("Error = %q (is %v)", err, errors.Is(err, io.ErrUnexpectedEOF))
	}
}

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"line\nnext\ttab", "line\nnext\ttab"},
		{"nul\x00here\x07bell\x7f", "nulherebell"},
		{"bad \xc3\x28", "bad \uFFFD("},
	}
	for _, tt := range tests {
		got := Text(tt.in)
		if got != tt.want || !IsClean(got) || IsClean(tt.in) != (tt.in == tt.want) {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
