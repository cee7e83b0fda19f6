package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

func (a *analyzer) setVar(name string, v value) {
	if a.vars == nil {
		a.vars = map[string]value{}
	}
	a.vars[name] = v
}

func (a *analyzer) assign(as *syntax.Assign, persist bool) {
	if as.Name == nil {
		return
	}
	name := as.Name.Value
	if as.Array != nil {
		var arr []field
		for _, e := range as.Array.Elems {
			arr = a.appendWordFields(arr, e.Value)
		}
		a.checkEnv(name, field{s: strings.Join(fieldStrings(arr), " ")}, true)
		if persist {
			a.setVar(name, value{isArr: true, arr: arr})
		}
		return
	}
	f := a.word1(as.Value)
	if as.Append {
		if old, ok := a.vars[name]; ok && !old.isArr {
			f.s = old.f.s + f.s
			f.dyn = f.dyn || old.f.dyn
			f.t |= old.f.t
		} else if !ok {
			f.s = unkS + f.s
			f.dyn = true
		}
	}
	a.checkEnv(name, f, true)
	if persist {
		a.setVar(name, value{f: f})
	}
}

func fieldStrings(fs []field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.s
	}
	return out
}

func (a *analyzer) declClause(x *syntax.DeclClause) {
	for _, as := range x.Args {
		a.substsAssign(as)
		switch {
		case as.Name != nil && as.Naked:
			a.checkEnv(as.Name.Value, field{}, false)
		case as.Name != nil:
			a.assign(as, true)
		case as.Value != nil:
			f := a.word1(as.Value)
			if strings.HasPrefix(f.s, "-") || strings.HasPrefix(f.s, "+") {
				continue // options such as -x or -p
			}
			name, val, ok := strings.Cut(f.s, "=")
			if !ok {
				a.checkEnv(name, field{}, false)
				continue
			}
			v := field{s: val, dyn: f.dyn, t: f.t}
			a.checkEnv(name, v, true)
			a.setVar(name, value{f: v})
		}
	}
}

// readFile returns what a command reads from a redirected file.
func (a *analyzer) readFile(f field) desc {
	if f.dyn {
		return desc{t: f.t}
	}
	if f.proc != nil {
		return *f.proc
	}
	t := a.target(f)
	a.want(t, "data")
	if d, ok := a.files[t.p]; ok {
		return d
	}
	var tt taint
	if isDevNet(f.s) {
		tt |= tRemote
	}
	if a.isCredential(t) {
		a.add(ruleReadCreds)
		tt |= tSecret
	} else if a.isSecretSource(t) {
		tt |= tSecret
	}
	return desc{t: tt, src: t.p}
}

// Walking command substitutions nested in words, for their own effects.

func (a *analyzer) substsWord(w *syntax.Word) {
	if w == nil {
		return
	}
	for _, p := range w.Parts {
		a.substsPart(p)
	}
}

func (a *analyzer) substsPart(p syntax.WordPart) {
	switch p := p.(type) {
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			a.substsPart(q)
		}
	case *syntax.CmdSubst:
		cwd, dyn := a.cwd, a.cwdDyn
		a.forking++
		a.walkStmts(p.Stmts, desc{})
		a.forking--
		a.cwd, a.cwdDyn = cwd, dyn
	case *syntax.ProcSubst:
		if p.Op == syntax.CmdOut {
			return // walked by the command that writes to it
		}
		a.forking++
		a.walkStmts(p.Stmts, desc{})
		a.forking--
	case *syntax.ParamExp:
		if p.Exp != nil {
			a.substsWord(p.Exp.Word)
		}
		if p.Repl != nil {
			a.substsWord(p.Repl.Orig)
			a.substsWord(p.Repl.With)
		}
		if p.Slice != nil {
			a.substsArith(p.Slice.Offset)
			a.substsArith(p.Slice.Length)
		}
		a.substsArith(p.Index)
	case *syntax.ArithmExp:
		a.substsArith(p.X)
	}
}

func (a *analyzer) substsArith(x syntax.ArithmExpr) {
	switch x := x.(type) {
	case *syntax.Word:
		a.substsWord(x)
	case *syntax.BinaryArithm:
		a.substsArith(x.X)
		a.substsArith(x.Y)
	case *syntax.UnaryArithm:
		a.substsArith(x.X)
	case *syntax.ParenArithm:
		a.substsArith(x.X)
	}
}

func (a *analyzer) substsTest(x syntax.TestExpr) {
	switch x := x.(type) {
	case *syntax.Word:
		a.substsWord(x)
	case *syntax.BinaryTest:
		a.substsTest(x.X)
		a.substsTest(x.Y)
	case *syntax.UnaryTest:
		a.substsTest(x.X)
	case *syntax.ParenTest:
		a.substsTest(x.X)
	}
}

func (a *analyzer) substsAssign(as *syntax.Assign) {
	a.substsWord(as.Value)
	a.substsArith(as.Index)
	if as.Array != nil {
		for _, e := range as.Array.Elems {
			a.substsWord(e.Value)
			a.substsArith(e.Index)
		}
	}
}

// evalStmts computes, without recording findings, what statements print.
// It resolves $(...) to static text where it can.
func (a *analyzer) evalStmts(stmts []*syntax.Stmt, in desc) desc {
	out := desc{known: true}
	for _, s := range stmts {
		out = concatDesc(out, a.evalStmt(s, in))
	}
	return out
}

func (a *analyzer) evalStmt(s *syntax.Stmt, in desc) desc {
	if !a.step() {
		return desc{}
	}
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = a.heredoc(r)
		case syntax.WordHdoc:
			f := a.word1(r.Word)
			in = desc{text: f.s + "\n", known: !f.dyn, t: f.t}
		case syntax.RdrIn:
			f := a.word1(r.Word)
			in = desc{}
			if !f.dyn {
				t := a.target(f)
				if d, ok := a.files[t.p]; ok {
					in = d
				} else if isDevNet(f.s) {
					in.t = tRemote
				} else if a.isSecretSource(t) {
					in.t = tSecret
				}
			}
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
			if r.N == nil || r.N.Value == "1" {
				return desc{known: true}
			}
		}
	}
	switch x := s.Cmd.(type) {
	case *syntax.CallExpr:
		if len(x.Args) == 0 {
			return desc{known: true}
		}
		return a.produce(a.fieldsOf(x.Args), in)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			return a.evalStmt(x.Y, a.evalStmt(x.X, in))
		}
		return concatDesc(a.evalStmt(x.X, in), a.evalStmt(x.Y, in))
	case *syntax.Subshell:
		return a.evalStmts(x.Stmts, in)
	case *syntax.Block:
		return a.evalStmts(x.Stmts, in)
	}
	return desc{t: in.t}
}
