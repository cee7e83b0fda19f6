package sandbox

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ShellQuote returns s as one word of a POSIX shell. Printable text is quoted by
// syntax.Quote. POSIX sh has no escape sequences for the rest (tabs, newlines, invalid
// UTF-8), but single quotes keep every byte except NUL literally, so such text is single
// quoted. A NUL byte cannot reach a shell in any form; callers reject it first.
func ShellQuote(s string) string {
	if q, err := syntax.Quote(s, syntax.LangPOSIX); err == nil {
		return q
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
