package policy

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// paramExp resolves a parameter expansion.
func (a *analyzer) paramExp(p *syntax.ParamExp) value {
	if p.Param == nil {
		return value{f: field{s: unkS, dyn: true}}
	}
	name := p.Param.Value
	v, known := a.lookup(name)
	if p.Excl && p.Names == 0 && p.Index == nil {
		// ${!name}: indirection.
		if !known || v.f.dyn {
			return value{f: field{s: unkS, dyn: true}}
		}
		v, known = a.lookup(v.f.s)
	}
	if p.Length {
		if !known || v.f.dyn {
			return value{f: field{s: unkS, dyn: true}}
		}
		if v.isArr {
			return value{f: lit(strconv.Itoa(len(v.arr)))}
		}
		return value{f: lit(strconv.Itoa(utf8.RuneCountInString(v.f.s)))}
	}
	if p.Index != nil {
		v = a.index(v, p.Index)
	}
	if p.Exp != nil {
		out := a.paramOp(v, known, p.Exp)
		empty := known && !v.f.dyn && !v.isArr && v.f.s == ""
		if p.Param != nil && (p.Exp.Op == syntax.AssignUnset && !known ||
			p.Exp.Op == syntax.AssignUnsetOrNull && (!known || empty)) {
			set := out
			if raw := p.Exp.Word.Lit(); promptOctal.MatchString(raw) && !out.f.dyn {
				// Inside double quotes "\140" keeps its backslash; ${x@P} decodes it later.
				set = value{f: field{s: raw, t: out.f.t}}
			}
			a.setVar(p.Param.Value, set) // ${x=v} assigns as well as expands
		}
		return out
	}
	if !known {
		return v
	}
	if v.isArr {
		return v
	}
	if p.Slice != nil {
		v.f.s = a.slice(v.f.s, p.Slice)
	}
	if p.Repl != nil && !v.f.dyn {
		orig := a.word1(p.Repl.Orig).s
		with := a.word1(p.Repl.With).s
		switch {
		case orig == "":
		case strings.HasPrefix(orig, "#"):
			if strings.HasPrefix(v.f.s, orig[1:]) {
				v.f.s = with + v.f.s[len(orig)-1:]
			}
		case strings.HasPrefix(orig, "%"):
			if strings.HasSuffix(v.f.s, orig[1:]) {
				v.f.s = v.f.s[:len(v.f.s)-len(orig)+1] + with
			}
		case p.Repl.All:
			v.f.s = strings.ReplaceAll(v.f.s, orig, with)
		default:
			v.f.s = strings.Replace(v.f.s, orig, with, 1)
		}
	}
	return v
}

func (a *analyzer) index(v value, idx syntax.ArithmExpr) value {
	if w, ok := idx.(*syntax.Word); ok {
		if s := w.Lit(); s == "@" || s == "*" {
			if !v.isArr {
				return value{isArr: true, arr: []field{v.f}}
			}
			return v
		}
	}
	n, ok := a.arith(idx)
	if !ok {
		return value{f: field{s: unkS, dyn: true}}
	}
	if !v.isArr {
		if n == 0 {
			return v
		}
		return value{f: field{s: unkS, dyn: true}}
	}
	if n < 0 {
		n += len(v.arr)
	}
	if n < 0 || n >= len(v.arr) {
		return value{}
	}
	return value{f: v.arr[n]}
}

func (a *analyzer) slice(s string, sl *syntax.Slice) string {
	off, ok := a.arith(sl.Offset)
	if !ok {
		return unkS
	}
	r := []rune(s)
	if off < 0 {
		off += len(r)
	}
	off = max(0, min(off, len(r)))
	end := len(r)
	if sl.Length != nil {
		n, ok := a.arith(sl.Length)
		if !ok {
			return unkS
		}
		if n < 0 {
			end = len(r) + n
		} else {
			end = off + n
		}
		end = max(off, min(end, len(r)))
	}
	return string(r[off:end])
}

func (a *analyzer) paramOp(v value, known bool, e *syntax.Expansion) value {
	arg := func() value {
		f := a.word1(e.Word)
		return value{f: f}
	}
	empty := known && !v.f.dyn && !v.isArr && v.f.s == ""
	switch e.Op {
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull:
		// An unknown variable is most likely unset in practice.
		if !known || (empty && (e.Op == syntax.DefaultUnsetOrNull || e.Op == syntax.AssignUnsetOrNull)) {
			return arg()
		}
		return v
	case syntax.AlternateUnset, syntax.AlternateUnsetOrNull:
		if !known {
			return value{f: field{s: unkS, dyn: true}}
		}
		if empty && e.Op == syntax.AlternateUnsetOrNull {
			return value{}
		}
		return arg()
	case syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
		return v
	case syntax.OtherParamOps:
		if a.word1(e.Word).s == "P" {
			return a.promptExpand(v, known)
		}
	}
	if !known || v.isArr || v.f.dyn {
		return v
	}
	s := v.f.s
	pat := a.word1(e.Word).s
	switch e.Op {
	case syntax.RemSmallPrefix, syntax.RemLargePrefix:
		s = trimPattern(s, pat, true, e.Op == syntax.RemLargePrefix)
	case syntax.RemSmallSuffix, syntax.RemLargeSuffix:
		s = trimPattern(s, pat, false, e.Op == syntax.RemLargeSuffix)
	case syntax.UpperAll:
		s = strings.ToUpper(s)
	case syntax.LowerAll:
		s = strings.ToLower(s)
	case syntax.UpperFirst:
		if s != "" {
			s = strings.ToUpper(s[:1]) + s[1:]
		}
	case syntax.LowerFirst:
		if s != "" {
			s = strings.ToLower(s[:1]) + s[1:]
		}
	}
	v.f.s = s
	return v
}

// promptExpand judges ${x@P}: bash expands the value as a prompt string, which decodes
// \NNN escapes and then runs $(...) and backquoted commands in it. The value is checked as
// the shell text it becomes; a value that is not known is code that cannot be checked.
func (a *analyzer) promptExpand(v value, known bool) value {
	if !known || v.f.dyn || v.isArr {
		a.add(ruleEvalDynamic)
		return value{f: field{s: unkS, dyn: true}}
	}
	text := promptOctal.ReplaceAllStringFunc(v.f.s, func(m string) string {
		n, err := strconv.ParseUint(m[1:], 8, 8)
		if err != nil {
			return m
		}
		return string(rune(n))
	})
	if strings.Contains(text, "$(") || strings.Contains(text, "`") {
		a.shellCode(field{s: "echo \"" + strings.ReplaceAll(text, `"`, `\"`) + "\""}, desc{}, nil, false)
		return value{f: field{s: unkS, dyn: true}}
	}
	return value{f: field{s: text, t: v.f.t}}
}

var promptOctal = regexp.MustCompile(`\\[0-7]{3}`)

// trimPattern removes the shortest or longest prefix or suffix of s that
// matches the glob pat.
func trimPattern(s, pat string, prefix, longest bool) string {
	if pat == "" {
		return s
	}
	match := func(x string) bool {
		ok, err := path.Match(pat, x)
		return err == nil && ok
	}
	n := len(s)
	for k := 0; k <= n; k++ {
		i := k
		if longest {
			i = n - k
		}
		if prefix {
			if match(s[:i]) {
				return s[i:]
			}
		} else if match(s[n-i:]) {
			return s[:n-i]
		}
	}
	return s
}

// lookup returns a variable's value and whether it is known.
func (a *analyzer) lookup(name string) (value, bool) {
	if v, ok := a.vars[name]; ok {
		return v, true
	}
	if len(name) == 1 && name[0] >= '0' && name[0] <= '9' || name == "@" || name == "*" || name == "#" {
		return a.positional(name)
	}
	switch name {
	case "IFS":
		return value{f: lit(" ")}, true
	case "HOME":
		return value{f: lit(a.c.home)}, true
	case "PWD":
		return value{f: field{s: a.pwd(), dyn: a.cwdDyn}}, true
	case "TMPDIR":
		return value{f: field{s: "/tmp", t: tTempVar}}, true
	case "XDG_CONFIG_HOME":
		return value{f: lit(a.c.home + "/.config")}, true
	case "XDG_STATE_HOME":
		return value{f: lit(a.c.home + "/.local/state")}, true
	case "XDG_DATA_HOME":
		return value{f: lit(a.c.home + "/.local/share")}, true
	case "XDG_CACHE_HOME":
		return value{f: lit(a.c.home + "/.cache")}, true
	case "PATH":
		return value{f: lit(defaultPath)}, true
	case "SHELL", "BASH":
		return value{f: lit("/bin/bash")}, true
	case "PPID":
		return value{f: field{s: unkS, dyn: true, t: tSupervisor}}, true
	}
	if isSecretName(name) {
		return value{f: field{s: unkS, dyn: true, t: tSecret}}, false
	}
	return value{f: field{s: unkS, dyn: true}}, false
}

func (a *analyzer) positional(name string) (value, bool) {
	if !a.posSet {
		f := field{s: unkS, dyn: true, posRef: true}
		if name == "0" {
			return value{f: lit("bash")}, true
		}
		return value{f: f}, false
	}
	switch name {
	case "@", "*":
		if len(a.pos) <= 1 {
			return value{isArr: true}, true
		}
		return value{isArr: true, arr: a.pos[1:]}, true
	case "#":
		return value{f: lit(strconv.Itoa(max(0, len(a.pos)-1)))}, true
	}
	i := int(name[0] - '0')
	if i < len(a.pos) {
		return value{f: a.pos[i]}, true
	}
	return value{}, true
}

// arith evaluates simple integer arithmetic.
func (a *analyzer) arith(x syntax.ArithmExpr) (int, bool) {
	switch x := x.(type) {
	case *syntax.Word:
		f := a.word1(x)
		if f.dyn {
			return 0, false
		}
		s := strings.TrimSpace(f.s)
		if n, err := strconv.Atoi(s); err == nil {
			return n, true
		}
		if v, ok := a.vars[s]; ok && !v.f.dyn {
			n, err := strconv.Atoi(v.f.s)
			return n, err == nil
		}
		return 0, false
	case *syntax.ParenArithm:
		return a.arith(x.X)
	case *syntax.UnaryArithm:
		n, ok := a.arith(x.X)
		switch x.Op {
		case syntax.Minus:
			return -n, ok
		case syntax.Plus:
			return n, ok
		}
		return 0, false
	case *syntax.BinaryArithm:
		l, ok1 := a.arith(x.X)
		r, ok2 := a.arith(x.Y)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch x.Op {
		case syntax.Add:
			return l + r, true
		case syntax.Sub:
			return l - r, true
		case syntax.Mul:
			return l * r, true
		case syntax.Quo:
			if r != 0 {
				return l / r, true
			}
		case syntax.Rem:
			if r != 0 {
				return l % r, true
			}
		}
	}
	return 0, false
}
