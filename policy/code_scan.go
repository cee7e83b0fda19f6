package policy

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Scanning interpreter code: string literals, call sites and their
// arguments, shared by every language in code_*.go.

// codeLit is a string literal in interpreter code.
type codeLit struct {
	val        string
	start, end int  // span in the code, quotes included
	exec       bool // a backtick or qx literal: runs a shell command
}

func codeLits(lang, code string) []codeLit {
	var out []codeLit
	for i := 0; i < len(code) && len(out) < 512; i++ {
		c := code[i]
		if (c == 'c' || c == 'S') && (i == 0 || !isIdent(code[i-1])) {
			if l, ok := charCodeLit(code, i); ok {
				out = append(out, l)
				i = l.end - 1
				continue
			}
		}
		switch {
		case c == '"' || c == '\'' || c == '`':
			if strings.HasPrefix(code[i:], `"""`) || strings.HasPrefix(code[i:], `'''`) {
				q := code[i : i+3]
				j := strings.Index(code[i+3:], q)
				if j < 0 {
					return out
				}
				out = append(out, codeLit{val: unescapeCode(code[i+3:i+3+j], false), start: i, end: i + 6 + j})
				i += 5 + j
				continue
			}
			j := i + 1
			for j < len(code) && code[j] != c {
				if code[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(code) {
				return out
			}
			raw := code[i+1 : j]
			single := c == '\'' && lang != "python" && lang != "node" && lang != "deno" && lang != "bun" && lang != "lua"
			prefix := byte(0)
			if i > 0 {
				prefix = code[i-1] | 0x20 // lower case
			}
			if prefix == 'r' && lang == "python" {
				single = true
			}
			val := unescapeCode(raw, single)
			switch {
			case lang == "python" && prefix == 'f':
				val = markInterpolation(val, "{", "}")
			case (lang == "perl" || lang == "php") && !single:
				val = markSigils(val)
			case lang == "ruby" && !single:
				val = markInterpolation(val, "#{", "}")
			}
			l := codeLit{val: val, start: i, end: j + 1}
			if c == '`' && lang != "node" && lang != "deno" && lang != "bun" && lang != "awk" {
				l.exec = true
			}
			if c == '`' && (lang == "node" || lang == "deno" || lang == "bun") {
				l.val = strings.ReplaceAll(l.val, "${", unkS+"{")
			}
			out = append(out, l)
			i = j
		case (lang == "perl" && (c == 'q') || lang == "ruby" && c == '%') && i+2 < len(code) && (i == 0 || !isIdent(code[i-1])):
			k := i + 1
			exec := false
			switch {
			case code[k] == 'x':
				exec = true
				k++
			case code[k] == 'q' || code[k] == 'Q' || code[k] == 'w':
				k++
			case lang == "ruby":
			default:
				if isIdent(code[k]) {
					continue
				}
			}
			if k >= len(code) {
				return out
			}
			open := code[k]
			closeCh := closer(open)
			if closeCh == 0 {
				if isIdent(open) || open == ' ' || open == '=' {
					continue
				}
				closeCh = open
			}
			j := strings.IndexByte(code[k+1:], closeCh)
			if j < 0 {
				return out
			}
			out = append(out, codeLit{val: code[k+1 : k+1+j], start: i, end: k + 2 + j, exec: exec})
			i = k + 1 + j
		}
	}
	return out
}

// markInterpolation replaces each open...close expression in a string
// literal with unk.
func markInterpolation(s, open, close string) string {
	if !strings.Contains(s, open) {
		return s
	}
	var sb strings.Builder
	for {
		i := strings.Index(s, open)
		if i < 0 || strings.HasPrefix(s[i:], "{{") {
			if i >= 0 {
				sb.WriteString(s[:i+2])
				s = s[i+2:]
				continue
			}
			sb.WriteString(s)
			return sb.String()
		}
		j := strings.Index(s[i:], close)
		if j < 0 {
			sb.WriteString(s)
			return sb.String()
		}
		sb.WriteString(s[:i])
		sb.WriteString(unkS)
		s = s[i+j+len(close):]
	}
}

// markSigils replaces Perl and PHP variables in a double-quoted string
// ($x, ${x}, @x, $x{k}) with unk.
func markSigils(s string) string {
	if !strings.ContainsAny(s, "$@") {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c == '$' || c == '@') && i+1 < len(s) && (isIdent(s[i+1]) || s[i+1] == '{') {
			j := i + 1
			if s[j] == '{' {
				if k := strings.IndexByte(s[j:], '}'); k >= 0 {
					j += k + 1
				}
			}
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			for j < len(s) && (s[j] == '{' || s[j] == '[') {
				k := strings.IndexAny(s[j:], "}]")
				if k < 0 {
					break
				}
				j += k + 1
			}
			sb.WriteString(unkS)
			i = j - 1
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

func closer(c byte) byte {
	switch c {
	case '{':
		return '}'
	case '(':
		return ')'
	case '[':
		return ']'
	case '<':
		return '>'
	}
	return 0
}

// charCodeLit reads chr(N) or String.fromCharCode(N, ...) at i as a literal.
func charCodeLit(code string, i int) (codeLit, bool) {
	var open int
	switch {
	case strings.HasPrefix(code[i:], "chr("):
		open = i + 4
	case strings.HasPrefix(code[i:], "String.fromCharCode("):
		open = i + len("String.fromCharCode(")
	default:
		return codeLit{}, false
	}
	end := strings.IndexByte(code[open:], ')')
	if end < 0 {
		return codeLit{}, false
	}
	var sb strings.Builder
	for _, num := range strings.Split(code[open:open+end], ",") {
		num = strings.TrimSpace(num)
		base := 10
		if strings.HasPrefix(num, "0x") || strings.HasPrefix(num, "0X") {
			num, base = num[2:], 16
		}
		n, err := strconv.ParseInt(num, base, 32)
		if err != nil || n < 0 || n > utf8.MaxRune {
			return codeLit{}, false
		}
		sb.WriteRune(rune(n))
	}
	return codeLit{val: sb.String(), start: i, end: open + end + 1}, true
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func unescapeCode(s string, single bool) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	if single {
		return strings.NewReplacer(`\\`, `\`, `\'`, `'`).Replace(s)
	}
	return ansiC(s)
}

func langKey(lang string) string {
	switch lang {
	case "python", "perl", "ruby", "php", "lua", "awk":
		return lang
	case "node", "deno", "bun":
		return "node"
	case "Rscript":
		return "R"
	case "tclsh", "expect":
		return "tcl"
	}
	return "other"
}

// call sites of name( in code; returns the spans of their argument lists.
func callSites(code, name string, lits []codeLit, bareWord bool) [][2]int {
	var out [][2]int
	for off := 0; off < len(code); {
		i := strings.Index(code[off:], name)
		if i < 0 {
			break
		}
		i += off
		off = i + len(name)
		if i > 0 && (isIdent(code[i-1]) || code[i-1] == '$' || code[i-1] == '@') || off < len(code) && isIdent(code[off]) {
			continue
		}
		if inLit(lits, i) {
			continue
		}
		j := off
		for j < len(code) && (code[j] == ' ' || code[j] == '\t') {
			j++
		}
		if j < len(code) && code[j] == '(' {
			end := matchParen(code, j, lits)
			out = append(out, [2]int{j + 1, end})
			continue
		}
		if bareWord && j < len(code) && j > off && (code[j] == '"' || code[j] == '\'' || code[j] == '$' || code[j] == '[' || code[j] == '%' || code[j] == 's') {
			end := strings.IndexAny(code[j:], ";\n}")
			if end < 0 {
				end = len(code)
			} else {
				end += j
			}
			out = append(out, [2]int{j, end})
		}
	}
	return out
}

func inLit(lits []codeLit, i int) bool {
	for _, l := range lits {
		if i >= l.start && i < l.end {
			return true
		}
		if l.start > i {
			return false
		}
	}
	return false
}

func matchParen(code string, open int, lits []codeLit) int {
	depth := 0
	for i := open; i < len(code); i++ {
		if j := litAt(lits, i); j >= 0 {
			i = lits[j].end - 1
			continue
		}
		switch code[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return len(code)
}

// argText turns the literals of a call's argument list into a shell
// command: an argv list is joined with spaces; otherwise the first argument
// is taken as a concatenation, with unresolved parts marked.
func argText(code string, span [2]int, lits []codeLit, join string) (string, bool) {
	var vals []string
	var outside strings.Builder
	prev := span[0]
	for _, l := range lits {
		if l.start < span[0] || l.end > span[1] {
			continue
		}
		outside.WriteString(code[prev:l.start])
		outside.WriteByte(' ')
		prev = l.end
		vals = append(vals, l.val)
	}
	if prev < span[1] && span[1] <= len(code) {
		outside.WriteString(code[prev:span[1]])
	}
	rest := outside.String()
	if len(vals) == 0 {
		return "", false
	}
	if strings.ContainsRune(rest, '[') || join == " " && strings.ContainsRune(rest, ',') {
		for i, v := range vals {
			vals[i] = sandbox.ShellQuote(v)
		}
		s := strings.Join(vals, " ")
		if hasFreeIdent(rest) {
			s += " " + unkS
		}
		return s, true
	}
	s := concatArg(code, firstArgSpan(code, span, lits), lits)
	return s, s != ""
}

// firstArgSpan narrows an argument list to its first argument.
func firstArgSpan(code string, span [2]int, lits []codeLit) [2]int {
	depth := 0
	for i := span[0]; i < span[1] && i < len(code); i++ {
		if j := litAt(lits, i); j >= 0 {
			i = lits[j].end - 1
			continue
		}
		switch code[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				return [2]int{span[0], i}
			}
		}
	}
	return span
}

func litAt(lits []codeLit, i int) int {
	for k, l := range lits {
		if l.start == i {
			return k
		}
		if l.start > i {
			break
		}
	}
	return -1
}

// concatArg joins the literals of an expression, marking identifiers and
// calls between them as unresolved.
func concatArg(code string, span [2]int, lits []codeLit) string {
	return concatArgHome(code, span, lits, "")
}

// homeIdents are expressions for the home directory in interpreter code.
var homeIdents = map[string]bool{
	"os.homedir": true, "homedir": true, "Dir.home": true, "process.env.HOME": true, "Path.home": true,
	"pathlib.Path.home": true, "os.environ.get": false,
}

func concatArgHome(code string, span [2]int, lits []codeLit, home string) string {
	var sb strings.Builder
	any := false
	for i := span[0]; i < span[1] && i < len(code); i++ {
		if j := litAt(lits, i); j >= 0 {
			sb.WriteString(lits[j].val)
			any = true
			i = lits[j].end - 1
			continue
		}
		if isIdent(code[i]) && (code[i] < '0' || code[i] > '9') {
			k := i
			for k < len(code) && (isIdent(code[k]) || code[k] == '.') {
				k++
			}
			id := code[i:k]
			switch {
			case home != "" && homeIdents[id]:
				sb.WriteString(home)
				any = true
				for k < len(code) && (code[k] == '(' || code[k] == ')') {
					k++
				}
			case !ignoredIdents[id] && !strings.HasSuffix(sb.String(), unkS):
				sb.WriteString(unkS)
			}
			i = k - 1
		}
	}
	if !any {
		return ""
	}
	return sb.String()
}

var ignoredIdents = map[string]bool{
	"shell": true, "True": true, "False": true, "None": true, "true": true, "false": true, "null": true, "check": true,
	"text": true, "capture_output": true, "stdout": true, "stderr": true, "stdin": true, "env": true, "cwd": true,
	"encoding": true, "universal_newlines": true, "timeout": true, "subprocess": true, "PIPE": true, "DEVNULL": true,
	"STDOUT": true, "executable": true, "os": true, "sys": true, "stdio": true, "inherit": true, "pipe": true,
	"ignore": true, "detached": true, "windowsHide": true, "maxBuffer": true, "my": true, "qw": true, "undef": true,
	"split": true, "exception": true, "chdir": true, "out": true, "err": true, "in": true, "close_fds": true,
	"bufsize": true, "input": true, "fileno": true, "expanduser": true, "os.path.expanduser": true,
	"path.expanduser": true, "Path": true, "pathlib.Path": true, "File.expand_path": true, "expand_path": true, "s": true, "p": true, "f": true, "STDIN": true, "STDERR": true,
}

// hasFreeIdent reports whether code outside literals names a variable.
func hasFreeIdent(s string) bool {
	for i := 0; i < len(s); {
		if !isIdent(s[i]) || s[i] >= '0' && s[i] <= '9' {
			i++
			continue
		}
		j := i
		for j < len(s) && isIdent(s[j]) {
			j++
		}
		if !ignoredIdents[s[i:j]] {
			return true
		}
		i = j
	}
	return false
}
