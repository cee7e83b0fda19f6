package policy

import (
	"regexp"
	"strings"
)

// Calls through a name bound to a function: f = shutil.rmtree; f("/") is shutil.rmtree("/").
// The code rules look for calls by their dotted names, so a binding earlier in the code is
// undone before they read it.

// codeBinding matches name = dotted.function (or = a bare builtin that runs code) as a
// statement of its own: at the start of the code or of a line, or after ; or {.
var codeBinding = regexp.MustCompile(`(?m)(?:^|[;{])\s*(?:(?:const|let|var|my|local)\s+)?\$?([A-Za-z_]\w*)\s*=\s*` +
	`((?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*|eval|exec|system|__import__|getattr|spawn|popen)\s*(?:;|$)`)

// maxBindings bounds the bindings undone in one program.
const maxBindings = 32

// unbindCalls rewrites calls through names bound to functions into calls of the functions.
func unbindCalls(code string) string {
	if !strings.Contains(code, "=") {
		return code
	}
	ms := codeBinding.FindAllStringSubmatch(code, maxBindings)
	for _, m := range ms {
		name, fn := m[1], m[2]
		if name == fn {
			continue
		}
		call := regexp.MustCompile(`(^|[^\w.$])\$?` + regexp.QuoteMeta(name) + `\s*\(`)
		code = call.ReplaceAllString(code, "${1}"+fn+"(")
	}
	return code
}
