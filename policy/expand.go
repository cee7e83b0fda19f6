package policy

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// unk marks a part of a resolved string that could not be resolved
// statically (an unknown variable, a command substitution with unknown
// output, ...).
const (
	unk  = '\x00'
	unkS = "\x00"
)

// homeMark stands for the home directory when Options.Home is not set. It
// is absolute so that "~/.." cleans to "/home".
const homeMark = "/home/\x01"

// defaultPath is assumed for $PATH, so that slices such as ${PATH:0:1}
// resolve the way they would on a typical host.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// taint records where data came from.
type taint uint16

const (
	tRemote     taint = 1 << iota // fetched from the network
	tSecret                       // credentials, environment or history
	tDecoded                      // produced by a decoder or escape processing
	tInit                         // printed by a shell environment setup tool (eval "$(pyenv init -)")
	tCritical                     // process ids of critical processes (pgrep sshd)
	tDevice                       // block device names printed by findmnt, df, lsblk, blkid
	tSupervisor                   // the parent's or a supervising agent's process id
	tPidList                      // process ids from a listing of all processes
	tInfinite                     // an endless stream (yes, /dev/zero, /dev/urandom)
	tTempVar                      // the session's own temporary directory, named as $TMPDIR
)

// field is one resolved argument.
type field struct {
	s      string // value; unresolved parts are unk
	t      taint  // taint of substituted parts
	dyn    bool   // s contains unresolved parts
	subst  bool   // an unresolved part came from $(...) or backticks
	posRef bool   // an unresolved part is a positional parameter
	glob   bool   // unquoted glob metacharacters
	braces bool   // unquoted brace expansion candidate
	proc   *desc  // output of a <(...) process substitution
	// procOut are the commands of a >(...) process substitution, which
	// read what is written to the field's path.
	procOut []*syntax.Stmt
}

func lit(s string) field { return field{s: s} }

// value is a shell variable.
type value struct {
	f     field
	arr   []field
	isArr bool
}

type fieldBuilder struct {
	ifs      string // field separators; " \t\n" unless IFS was assigned
	out      []field
	cur      field
	sb       strings.Builder
	started  bool // cur holds content (possibly empty quoted content)
	overflow bool // cur grew past maxData; later parts are dropped
}

func (b *fieldBuilder) add(s string, quoted bool) {
	if b.overflow {
		return
	}
	if b.sb.Len()+len(s) > maxData {
		// Too long to track: the rest of the field is unresolved.
		b.sb.WriteString(unkS)
		b.started, b.overflow = true, true
		return
	}
	b.sb.WriteString(s)
	if quoted || s != "" {
		b.started = true
	}
}

func (b *fieldBuilder) flush() {
	if b.started {
		b.cur.s = b.sb.String()
		b.cur.dyn = b.cur.dyn || strings.IndexByte(b.cur.s, unk) >= 0
		b.out = append(b.out, b.cur)
	}
	b.cur = field{}
	b.sb.Reset()
	b.started, b.overflow = false, false
}

// addSplit appends an unquoted expansion, splitting it on whitespace.
func (b *fieldBuilder) addSplit(s string) {
	ifs := b.ifs
	if ifs == "" {
		b.add(s, false)
		return
	}
	for {
		i := strings.IndexAny(s, ifs)
		if i < 0 {
			b.add(s, false)
			return
		}
		b.add(s[:i], false)
		b.flush()
		s = s[i+1:]
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			return
		}
	}
}

func (a *analyzer) ifs() string {
	if v, ok := a.vars["IFS"]; ok && !v.f.dyn && !v.isArr {
		return v.f.s
	}
	return " \t\n"
}

// fieldsOf resolves words into argv fields.
func (a *analyzer) fieldsOf(words []*syntax.Word) []field {
	var out []field
	for _, w := range words {
		out = a.appendWordFields(out, w)
	}
	return out
}

// word1 resolves a word that is not subject to splitting (redirect targets,
// assignment values) into a single field.
func (a *analyzer) word1(w *syntax.Word) field {
	if w == nil {
		return field{}
	}
	fs := a.appendWordFields(nil, w)
	switch len(fs) {
	case 0:
		return field{}
	case 1:
		return fs[0]
	}
	f := fs[0]
	for _, g := range fs[1:] {
		f.s += " " + g.s
		f.t |= g.t
		f.dyn = f.dyn || g.dyn
		f.subst = f.subst || g.subst
		f.glob = f.glob || g.glob
	}
	return f
}

func (a *analyzer) appendWordFields(out []field, w *syntax.Word) []field {
	if w == nil {
		return out
	}
	a.step()
	b := fieldBuilder{ifs: a.ifs(), out: out}
	for i, part := range w.Parts {
		a.wordPart(&b, part, i == 0, false)
	}
	b.flush()
	if len(b.out) == len(out) {
		return b.out
	}
	// Brace expansion happens before the other expansions in bash; doing it
	// on the resolved text is close enough for the literal forms that hide
	// commands ({rm,-rf,/}).
	res := b.out[:len(out)]
	for _, f := range b.out[len(out):] {
		if !f.braces {
			res = append(res, f)
			continue
		}
		for _, s := range expandBraces(f.s, 64) {
			g := f
			g.s = s
			res = append(res, g)
		}
	}
	return res
}

func (a *analyzer) wordPart(b *fieldBuilder, part syntax.WordPart, first, quoted bool) {
	switch p := part.(type) {
	case *syntax.Lit:
		v := p.Value
		if quoted {
			b.add(unescapeDbl(v), true)
			return
		}
		if hasUnescaped(v, "*?") || hasBracketGlob(v) {
			b.cur.glob = true
		}
		if strings.Contains(v, "{") && (strings.Contains(v, ",") || strings.Contains(v, "..")) {
			b.cur.braces = true
		}
		v = unescapeLit(v)
		if first && strings.HasPrefix(v, "~") {
			v = a.tilde(v)
		}
		b.add(v, false)
	case *syntax.SglQuoted:
		if p.Dollar {
			b.add(ansiC(p.Value), true)
		} else {
			b.add(p.Value, true)
		}
	case *syntax.DblQuoted:
		b.started = true
		for _, q := range p.Parts {
			a.wordPart(b, q, false, true)
		}
	case *syntax.ParamExp:
		v := a.paramExp(p)
		b.cur.t |= v.f.t
		b.cur.subst = b.cur.subst || v.f.subst
		b.cur.posRef = b.cur.posRef || v.f.posRef
		if v.isArr {
			for i, e := range v.arr {
				if i > 0 {
					b.flush()
				}
				if quoted {
					b.add(e.s, true)
				} else {
					b.addSplit(e.s)
				}
				b.cur.t |= e.t
			}
			if quoted && len(v.arr) == 0 {
				// "$@" with no arguments produces no field.
				return
			}
			return
		}
		if quoted {
			b.add(v.f.s, true)
		} else {
			b.addSplit(v.f.s)
		}
	case *syntax.CmdSubst:
		d := a.evalStmts(p.Stmts, desc{known: true})
		b.cur.t |= d.t
		if !d.known {
			b.cur.subst = true
			b.add(unkS, true)
			return
		}
		s := strings.TrimRight(d.text, "\n")
		if quoted {
			b.add(s, true)
		} else {
			b.addSplit(s)
		}
	case *syntax.ArithmExp:
		if n, ok := a.arith(p.X); ok {
			b.add(strconv.Itoa(n), true)
		} else {
			b.add(unkS, true)
		}
	case *syntax.ProcSubst:
		d := desc{}
		if p.Op == syntax.CmdIn {
			d = a.evalStmts(p.Stmts, desc{known: true})
		} else {
			b.cur.procOut = p.Stmts
		}
		b.cur.proc = &d
		b.add("/dev/fd/63", true)
	case *syntax.ExtGlob:
		b.cur.glob = true
		b.add("*", false)
	case *syntax.BraceExp:
		b.add(unkS, true)
	}
}

// tilde expands a leading "~", "~/..." or "~user/...".
func (a *analyzer) tilde(v string) string {
	rest := v[1:]
	user := rest
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		user, rest = rest[:i], rest[i:]
	} else {
		rest = ""
	}
	switch user {
	case "":
		return a.c.home + rest
	case "+":
		return a.pwd() + rest
	case "-":
		return unkS + rest
	case "root":
		return "/root" + rest
	}
	return "/home/" + user + rest
}

func (a *analyzer) pwd() string {
	switch {
	case a.cwdDyn:
		return unkS
	case a.cwd != "":
		return a.cwd
	case a.c.workDir != "":
		return a.c.workDir
	}
	return "."
}

func unescapeLit(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			if s[i] == '\n' {
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func unescapeDbl(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}

func hasUnescaped(s, chars string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if strings.IndexByte(chars, s[i]) >= 0 {
			return true
		}
	}
	return false
}

func hasBracketGlob(s string) bool {
	i := strings.IndexByte(s, '[')
	return i >= 0 && strings.IndexByte(s[i+1:], ']') > 0
}

// ansiC decodes the body of a $'...' string.
func ansiC(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'a':
			sb.WriteByte(7)
		case 'b':
			sb.WriteByte(8)
		case 'e', 'E':
			sb.WriteByte(27)
		case 'f':
			sb.WriteByte(12)
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'v':
			sb.WriteByte(11)
		case 'c':
			if i+1 < len(s) {
				i++
				sb.WriteByte(s[i] & 0x1f)
			}
		case 'x', 'u', 'U':
			max := 2
			if c == 'u' {
				max = 4
			} else if c == 'U' {
				max = 8
			}
			n, j := 0, i+1
			for ; j < len(s) && j-i-1 < max && isHex(s[j]); j++ {
				n = n*16 + hexVal(s[j])
			}
			if j == i+1 {
				sb.WriteByte('\\')
				sb.WriteByte(c)
				continue
			}
			if c == 'x' {
				sb.WriteByte(byte(n))
			} else {
				sb.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n, j := 0, i
			for ; j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7'; j++ {
				n = n*8 + int(s[j]-'0')
			}
			sb.WriteByte(byte(n))
			i = j - 1
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return int(c-'A') + 10
}
