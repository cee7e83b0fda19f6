package policy

import "strings"

// Options of ordinary tools that run another program (argument injection
// into "read-only" commands): rg --pre, fd -x, go test -exec, sort
// --compress-program, man -P, zip -TT, gdb -ex, npx -c.

// optValue returns the value of option name (separate or "=" form) at
// args[i], and the index of the last argument consumed.
func optValue(args []field, i int, names ...string) (field, int, bool) {
	s := args[i].s
	for _, n := range names {
		if s == n && i+1 < len(args) {
			return args[i+1], i + 1, true
		}
		if strings.HasPrefix(n, "--") && strings.HasPrefix(s, n+"=") {
			f := args[i]
			f.s = s[len(n)+1:]
			return f, i, true
		}
		if !strings.HasPrefix(n, "--") && len(n) == 2 && strings.HasPrefix(s, n) && len(s) > 2 && n != "-x" {
			f := args[i]
			f.s = s[2:]
			return f, i, true
		}
	}
	return field{}, i, false
}

func (a *analyzer) toolExec(c *call) {
	args := c.args
	if sp, runs := grammarFor(c.name), runOpts[c.name]; sp != nil && runs != nil {
		p, _ := sp.read(args)
		for _, o := range p.opts {
			ro, ok := runs[o.name]
			if !ok {
				continue
			}
			if ro.rest {
				// fd -x cmd args... runs cmd on each result ("{}"), as find -exec does.
				if cmd := args[o.at+1:]; len(cmd) == 0 || !a.findReads(cmd) {
					a.add(ruleFindExec)
				}
				a.bulk++
				a.exec(replaceAll(args[o.at+1:], "{}", "./{}"), desc{})
				a.bulk--
				break
			}
			if ro.bare {
				a.add(ruleProgramOption)
				continue
			}
			if !o.has {
				continue
			}
			a.runOption(c.name, ro, o.val)
		}
	} else if c.name == "zip" {
		// zip's own parser: two-letter options such as -TT take a value.
		for i := 0; i < len(args); i++ {
			if args[i].s == "--" {
				break
			}
			v, j, ok := optValue(args, i, "-TT", "--unzip-command")
			if ok {
				i = j
				a.programOption(v)
			}
		}
	}
	if c.name == "go" {
		a.goRun(c)
	}
	if c.name == "npx" {
		for k, f := range args {
			if !strings.HasPrefix(f.s, "-") {
				if cmdBase(f.s) == "prisma" && frameworkDBDestroy("prisma", args[k+1:]) {
					a.add(ruleDatabase)
				}
				break
			}
		}
	}
	a.generic(c)
}

// runOption classifies v, the value of an option that runs a program.
func (a *analyzer) runOption(prog string, ro runOpt, v field) {
	switch {
	case ro.writes:
		// The write is judged like a redirect (outside the tree, a system
		// path...), and the option itself needs approval: the file it
		// writes does not show as a redirect to anyone reading the line.
		a.writeTarget(v, wCopy, desc{})
		a.add(ruleOptionWrite)
	case ro.lang == "gdb":
		s := strings.TrimSpace(v.s)
		switch {
		case strings.HasPrefix(s, "shell "):
			v.s = s[len("shell "):]
		case strings.HasPrefix(s, "!"):
			v.s = s[1:]
		case strings.HasPrefix(s, "python "):
			a.analyzeCode("python", s[len("python "):])
			return
		default:
			return
		}
		a.shellCode(v, desc{}, nil, false)
	case prog == "fzf" && ro.shell:
		// {} stands for each selected line.
		if strings.Contains(v.s, "{}") {
			v.s = strings.ReplaceAll(v.s, "{}", unkS)
			v.dyn = true
		}
		a.shellCode(v, desc{}, nil, false)
	case ro.shell:
		a.shellCode(v, desc{}, nil, false)
	default:
		a.programOption(v)
	}
}

func replaceAll(args []field, old, repl string) []field {
	out := make([]field, len(args))
	for i, f := range args {
		f.s = strings.ReplaceAll(f.s, old, repl)
		out[i] = f
	}
	return out
}

// editorCommands handles vim -c '!cmd', +'!cmd' and the like.
func (a *analyzer) editorCommands(args []field) {
	for i := 0; i < len(args); i++ {
		s := args[i].s
		var cmd string
		switch {
		case (s == "-c" || s == "--cmd") && i+1 < len(args):
			cmd = args[i+1].s
			i++
		case strings.HasPrefix(s, "+"):
			cmd = s[1:]
		default:
			continue
		}
		cmd = strings.TrimLeft(strings.TrimSpace(cmd), ":")
		switch {
		case strings.HasPrefix(cmd, "!"):
			a.shellCode(field{s: cmd[1:]}, desc{}, nil, false)
		case strings.HasPrefix(cmd, "call system("), strings.HasPrefix(cmd, "r !"), strings.HasPrefix(cmd, "read !"):
			if j := strings.IndexAny(cmd, "!\"'"); j >= 0 {
				a.shellCode(field{s: strings.Trim(cmd[j+1:], "\"')")}, desc{}, nil, false)
			}
		case strings.HasPrefix(cmd, "py3 "), strings.HasPrefix(cmd, "python3 "), strings.HasPrefix(cmd, "py "):
			a.analyzeCode("python", cmd[strings.IndexByte(cmd, ' ')+1:])
		}
	}
}
