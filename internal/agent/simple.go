//go:build unix

package agent

import (
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// A script that is one plain command — a program name and literal arguments, with no
// expansion, glob, redirect, assignment or control operator — cannot change the shell's
// state, so the helper runs it directly instead of starting a shell, a trap and a state
// save. That is most of what agents run (ls, cat, git status, pytest) and it halves their
// latency. Anything else, including every shell builtin and keyword, goes through the shell.

var simpleParsers = sync.Pool{New: func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }}

// shellOwned are names a shell resolves itself: builtins and keywords. Running an external
// program of the same name could behave differently (echo, pwd, kill…), so they keep the
// shell path. true and false are the exception: no shell gives them another meaning.
var shellOwned = map[string]bool{}

func init() {
	for _, n := range strings.Fields(`. : [ [[ ]] alias bg bind break builtin caller case cd command compgen
		complete compopt continue coproc declare dirs disown do done echo elif else enable esac eval exec
		exit export fc fg fi for function getopts hash help history if in jobs kill let local logout
		mapfile popd printf pushd pwd read readarray readonly return select set shift shopt source
		suspend test then time times trap type typeset ulimit umask unalias unset until wait while
		{ } ! local`) {
		shellOwned[n] = true
	}
}

// simpleCommand returns the argv of a script that is one plain command.
func simpleCommand(script string, env []string) ([]string, bool) {
	if len(script) > 4096 || strings.ContainsAny(script, "\n;&|<>()$`\\*?[]{}~#=\x00") {
		return nil, false
	}
	p := simpleParsers.Get().(*syntax.Parser)
	defer simpleParsers.Put(p)
	f, err := p.Parse(strings.NewReader(script), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	st := f.Stmts[0]
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return nil, false
	}
	argv := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		var b strings.Builder
		for _, part := range w.Parts {
			switch x := part.(type) {
			case *syntax.Lit:
				b.WriteString(x.Value)
			case *syntax.SglQuoted:
				if x.Dollar {
					return nil, false
				}
				b.WriteString(x.Value)
			case *syntax.DblQuoted:
				for _, dp := range x.Parts {
					lit, ok := dp.(*syntax.Lit)
					if !ok {
						return nil, false
					}
					b.WriteString(lit.Value)
				}
			default:
				return nil, false
			}
		}
		argv = append(argv, b.String())
	}
	name := argv[0]
	if shellOwned[name] || strings.HasPrefix(name, "-") {
		return nil, false
	}
	// Bash passes exported functions through the environment; such a name is a function.
	for _, kv := range env {
		if strings.HasPrefix(kv, "BASH_FUNC_"+name+"%%=") || strings.HasPrefix(kv, "BASH_FUNC_"+name+"()=") {
			return nil, false
		}
	}
	return argv, true
}
