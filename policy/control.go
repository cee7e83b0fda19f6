package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// checkForkBomb looks for a cycle of function calls that multiplies
// processes: a recursive call made in the background, or two recursive
// calls that each fork (f|f).
func (a *analyzer) checkForkBomb() {
	for i, e := range a.edges {
		if !e.fork || a.funcs[e.to] == nil || a.funcs[e.from] == nil {
			continue
		}
		if !e.bg {
			n := 0
			for _, f := range a.edges[i:] {
				if f.fork && f.from == e.from && f.to == e.to {
					n++
				}
			}
			if n < 2 {
				continue
			}
		}
		// Does e.to reach e.from?
		seen := map[string]bool{e.to: true}
		queue := []string{e.to}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			if n == e.from {
				a.add(ruleForkBomb)
				return
			}
			for _, f := range a.edges {
				if f.from == n && !seen[f.to] {
					seen[f.to] = true
					queue = append(queue, f.to)
				}
			}
		}
	}
}

// forkBombText recognises the classic fork bomb in text the parser
// rejects, such as ":(){:|:&};:".
func forkBombText(s string) bool {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' {
			return -1
		}
		return r
	}, s)
	for off := 0; ; {
		i := strings.Index(s[off:], "(){")
		if i < 0 {
			return false
		}
		i += off
		off = i + 3
		j := i
		for j > 0 && strings.IndexByte(";&|({}", s[j-1]) < 0 {
			j--
		}
		name := s[j:i]
		if name == "" {
			continue
		}
		body := s[i+3:]
		if strings.Contains(body, name+"|"+name) || strings.Contains(body, name+"&"+name) {
			return true
		}
	}
}

func (a *analyzer) forClause(x *syntax.ForClause, in desc) desc {
	switch l := x.Loop.(type) {
	case *syntax.CStyleLoop:
		a.substsArith(l.Init)
		a.substsArith(l.Cond)
		a.substsArith(l.Post)
		out := a.walkStmts(x.Do, in)
		if l.Cond == nil && spawnsWithoutPause(x.Do) {
			a.add(ruleForkBomb)
		}
		return out
	case *syntax.WordIter:
		for _, w := range l.Items {
			a.substsWord(w)
		}
		var items []field
		if l.InPos.IsValid() {
			items = a.fieldsOf(l.Items)
		} else if v, ok := a.positional("@"); ok {
			items = v.arr
		}
		name := l.Name.Value
		if len(items) == 0 || len(items) > maxLoopItems {
			a.setVar(name, value{f: field{s: unkS, dyn: true}})
			return a.walkStmts(x.Do, in)
		}
		out := desc{known: true}
		for _, it := range items {
			a.setVar(name, value{f: it})
			out = concatDesc(out, a.walkStmts(x.Do, in))
		}
		return out
	}
	return desc{}
}

func (a *analyzer) infiniteCond(x *syntax.WhileClause) bool {
	if len(x.Cond) != 1 {
		return false
	}
	switch c := x.Cond[0].Cmd.(type) {
	case *syntax.CallExpr:
		fs := a.fieldsOf(c.Args)
		if len(fs) == 0 {
			return false
		}
		name := cmdBase(fs[0].s)
		if x.Until {
			return name == "false"
		}
		switch name {
		case "true", ":":
			return true
		case "[", "test":
			return len(fs) >= 2 && fs[1].s != "" && fs[1].s != "0" && !fs[1].dyn && (len(fs) == 2 || len(fs) == 3 && fs[2].s == "]")
		}
	case *syntax.ArithmCmd:
		n, ok := a.arith(c.X)
		return ok && n != 0 && !x.Until
	}
	return false
}

// spawnsWithoutPause reports whether a loop body starts background jobs
// and never sleeps, waits or blocks on input.
func spawnsWithoutPause(body []*syntax.Stmt) bool {
	bg, _, pause := scanLoop(body)
	return bg && !pause
}

// fillsWithoutPause reports whether an endless loop body creates files or
// directories (or appends to them) and never pauses or stops.
func fillsWithoutPause(body []*syntax.Stmt) bool {
	_, fills, pause := scanLoop(body)
	return fills && !pause
}

// scanLoop reports whether a loop body starts background jobs, creates or
// writes files, and pauses or stops (sleep, wait, read, break, exit). A
// sleep sent to the background does not pause the loop.
func scanLoop(body []*syntax.Stmt) (bg, fills, pause bool) {
	for _, s := range body {
		syntax.Walk(s, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.Stmt:
				if n.Background {
					bg = true
					return false
				}
			case *syntax.Redirect:
				if n.Op == syntax.AppOut || n.Op == syntax.RdrOut {
					fills = true
				}
			case *syntax.CallExpr:
				if len(n.Args) > 0 {
					switch cmdBase(n.Args[0].Lit()) {
					case "sleep", "wait", "read", "break", "exit", "return", "usleep":
						pause = true
					case "mkdir", "touch", "cp", "dd", "fallocate", "truncate", "ln", "git":
						fills = true
					}
				}
			}
			return !pause
		})
	}
	return bg, fills, pause
}

func (a *analyzer) defineFunc(name string, body *syntax.Stmt) {
	if a.funcs == nil {
		a.funcs = map[string]*syntax.Stmt{}
	}
	a.funcs[name] = body
	a.walkFunc(name, body, nil, false)
}

// recordCall notes a call made inside a function body, for fork bombs.
func (a *analyzer) recordCall(name string) {
	if len(a.frames) == 0 || len(a.edges) >= maxEdges {
		return
	}
	top := a.frames[len(a.frames)-1]
	if top.defining {
		a.edges = append(a.edges, funcEdge{from: top.name, to: name, fork: a.forking > top.forkBase, bg: a.bg > top.bgBase})
	}
}

func (a *analyzer) walkFunc(name string, body *syntax.Stmt, args []field, posSet bool) {
	for _, f := range a.frames {
		if f.name == name {
			return
		}
	}
	a.frames = append(a.frames, funcFrame{name: name, forkBase: a.forking, bgBase: a.bg, defining: !posSet})
	savedPos, savedSet := a.pos, a.posSet
	if posSet {
		a.pos, a.posSet = append([]field{lit(name)}, args...), true
	}
	a.walkStmt(body, desc{})
	a.pos, a.posSet = savedPos, savedSet
	a.frames = a.frames[:len(a.frames)-1]
}

// inFuncDef reports whether a function body is being walked at its
// definition, where positional parameters are unknown by nature.
func (a *analyzer) inFuncDef() bool { return len(a.frames) > 0 && !a.posSet }
