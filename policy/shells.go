package policy

import "strings"

func (a *analyzer) shell(c *call) {
	hasC, stdin := false, false
	i := 0
	for ; i < len(c.args); i++ {
		s := c.args[i].s
		if s == "--" || s == "-" {
			stdin = stdin || s == "-"
			i++
			break
		}
		if strings.HasPrefix(s, "--") {
			if s == "--rcfile" || s == "--init-file" {
				i++
			}
			continue
		}
		if len(s) < 2 || (s[0] != '-' && s[0] != '+') {
			break
		}
		skip := 0
		for _, ch := range s[1:] {
			switch ch {
			case 'c':
				hasC = true
			case 's':
				stdin = true
			case 'o', 'O':
				skip++
			}
		}
		i += skip
	}
	rest := c.args[min(i, len(c.args)):]
	if hasC && !stdin {
		if len(rest) == 0 {
			return
		}
		var pos []field
		if len(rest) > 1 {
			pos = rest[1:]
		} else {
			pos = []field{lit(c.name)}
		}
		a.shellCode(rest[0], c.in, pos, true)
		return
	}
	if len(rest) > 0 && !stdin {
		a.runFile(rest[0], c.in)
		return
	}
	// The shell reads its commands from stdin: a pipe into it is code.
	a.stageShell = true
	in := c.in
	if a.pipedIn > 0 && !in.known && in.t&(tRemote|tDecoded|tInfinite) == 0 {
		// The commands are another program's output (git log | sh, a listing, a file's
		// lines). A file's content is read when the session can read it; anything else the
		// gate cannot see is code it cannot check.
		known := false
		if in.src != "" {
			in, known = a.runContent(target{p: in.src}, "sh")
		}
		if !known {
			a.add(ruleStdinScript)
		}
	}
	a.shellStdin(in)
}

// shellCode classifies a string run as shell code (bash -c, eval, su -c).
func (a *analyzer) shellCode(f field, in desc, pos []field, posSet bool) {
	if f.t&tRemote != 0 {
		a.add(rulePipeShell)
	}
	if f.t&tDecoded != 0 {
		a.add(ruleObfuscated)
	}
	if f.dyn {
		if strings.Trim(f.s, unkS+" \t\n;") == "" {
			if f.t&(tRemote|tDecoded|tInit) == 0 && !(f.posRef && a.inFuncDef()) {
				a.add(ruleEvalDynamic)
			}
			return
		}
		if _, ok := a.runScriptMode(strings.ReplaceAll(f.s, unkS, "${__hs_unresolved}"), in, pos, posSet, false); !ok &&
			!(f.posRef && a.inFuncDef()) {
			a.add(ruleEvalDynamic) // partly known code that cannot be checked
		}
		return
	}
	a.runScript(f.s, in, pos, posSet)
}

// shellStdin classifies what a shell reads as commands from stdin.
func (a *analyzer) shellStdin(in desc) {
	if in.t&tInfinite != 0 {
		// yes 'cmd &' | sh runs the line forever.
		if strings.Contains(in.text, "&") {
			a.add(ruleForkBomb)
		} else {
			a.add(ruleFillDisk)
		}
	}
	if in.t&tRemote != 0 {
		a.add(rulePipeShell)
	}
	if in.t&tDecoded != 0 {
		a.add(ruleObfuscated)
	}
	if in.known && strings.TrimSpace(in.text) != "" {
		a.runScriptMode(strings.ReplaceAll(in.text, unkS, "${__hs_unresolved}"), desc{}, nil, false, in.t&tDecoded == 0)
	}
}

// runFile classifies a script file given to a shell or interpreter.
func (a *analyzer) runFile(f field, in desc) {
	if f.proc != nil {
		a.shellStdin(*f.proc)
		return
	}
	if f.s == "/dev/stdin" || f.s == "-" {
		a.shellStdin(in)
		return
	}
	if f.dyn {
		if f.t&tRemote != 0 {
			a.add(rulePipeShell)
		}
		return
	}
	d, known := a.runContent(a.target(f), "sh")
	if d.t&tRemote != 0 {
		a.add(ruleDownloadExec)
	}
	if known {
		a.shellStdin(d)
	}
}

func (a *analyzer) eval(c *call) {
	if len(c.args) == 0 {
		return
	}
	a.shellCode(joinFields(c.args), c.in, nil, false)
}

func (a *analyzer) source(c *call) {
	if len(c.args) == 0 {
		return
	}
	a.runFile(c.args[0], c.in)
}

func (a *analyzer) alias(c *call) {
	for _, f := range c.args {
		name, val, ok := strings.Cut(f.s, "=")
		if !ok || f.dyn {
			continue
		}
		if a.aliases == nil {
			a.aliases = map[string]string{}
		}
		a.aliases[name] = val
		a.shellCode(field{s: val}, desc{}, nil, false)
	}
}

func (a *analyzer) trap(c *call) {
	if len(c.args) < 2 {
		return
	}
	f := c.args[0]
	if f.s == "-" || f.s == "" || strings.HasPrefix(f.s, "-") {
		return
	}
	a.shellCode(f, desc{}, nil, false)
}
