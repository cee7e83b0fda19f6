package gate

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible returns s as it must be shown to a person who is asked to approve it: control
// characters (terminal escape sequences, carriage returns, backspaces), bidirectional
// controls, zero-width and other invisible characters, spaces other than the plain one and
// bytes that are not UTF-8 are written as escapes (\x1b, \r, \u202e), so the text cannot
// repaint the prompt or read differently from what runs. Newlines stay newlines: a
// multi-line script is shown on several lines. Every place that asks a person (the CLI
// prompt, the MCP elicitation message) shows commands through it.
func Visible(s string) string {
	if visibleAlready(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteByte('\n')
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case hiddenRune(r):
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// visibleAlready reports whether s is plain printable ASCII (and newlines), the common case.
func visibleAlready(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\n' && (c < 0x20 || c >= 0x7f) {
			return false
		}
	}
	return true
}

// hiddenRune reports whether a non-ASCII rune shows nothing, shows as something else, or
// changes how the text around it is laid out: C1 controls, format characters (bidirectional
// overrides and isolates, zero-width joiners, soft hyphen, BOM), line and paragraph
// separators, private-use and unassigned code points, spaces other than U+0020, and the
// letters that render as blanks (Hangul fillers, the braille blank).
func hiddenRune(r rune) bool {
	if r < 0x80 {
		return false
	}
	switch r {
	case 0x115f, 0x1160, 0x3164, 0xffa0, 0x2800, 0x034f, 0x17b4, 0x17b5, 0x180e:
		return true
	}
	if r >= 0xfe00 && r <= 0xfe0f || r >= 0xe0100 && r <= 0xe01ef { // variation selectors
		return true
	}
	return unicode.IsSpace(r) || !unicode.IsGraphic(r)
}
