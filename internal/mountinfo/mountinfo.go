// Package mountinfo holds what the host's tools (loopdisk) and the sandbox helper (its reset of
// a pool member) both need to read /proc/self/mountinfo.
package mountinfo

import (
	"strconv"
	"strings"
)

// Unescape undoes mountinfo's \ooo octal escapes of a path field (a space is \040, a
// backslash \134); anything else is kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
