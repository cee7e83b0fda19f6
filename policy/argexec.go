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
	for i := 0; i < len(args); i++ {
		if c.name == "rg" || c.name == "ag" {
			switch args[i].s {
			case "-e", "--regexp", "-f", "--file", "-g", "--glob", "-t", "--type", "-T", "--type-not", "--iglob", "-G":
				i++ // the value is a pattern, not an option
				continue
			}
		}
		var names []string
		switch c.name {
		case "rg":
			names = []string{"--pre", "--hostname-bin"}
		case "sort":
			names = []string{"--compress-program"}
		case "man":
			names = []string{"-P", "--pager", "--html", "-H"}
		case "ag":
			names = []string{"--pager"}
		case "fzf":
			names = []string{"--preview", "--bind"}
		case "entr":
			if args[i].s == "-s" && i+1 < len(args) {
				a.shellCode(args[i+1], desc{}, nil, false)
				i++
			}
			continue
		case "zip":
			names = []string{"-TT", "--unzip-command"}
		case "gdb":
			names = []string{"-ex", "--ex", "-eval-command", "--eval-command"}
		case "npx", "npm", "pnpm":
			names = []string{"-c", "--call"}
		case "go":
			names = []string{"-exec", "-toolexec", "--exec", "--toolexec"}
		case "fd", "fdfind":
			if s := args[i].s; s == "-x" || s == "--exec" || s == "-X" || s == "--exec-batch" {
				a.bulk++
				a.exec(replaceAll(args[i+1:], "{}", "./{}"), desc{})
				a.bulk--
				return
			}
			continue
		}
		v, j, ok := optValue(args, i, names...)
		if !ok {
			continue
		}
		i = j
		if c.name == "gdb" {
			s := strings.TrimSpace(v.s)
			switch {
			case strings.HasPrefix(s, "shell "):
				v.s = s[len("shell "):]
			case strings.HasPrefix(s, "!"):
				v.s = s[1:]
			case strings.HasPrefix(s, "python "):
				a.analyzeCode("python", s[len("python "):])
				continue
			default:
				continue
			}
		}
		switch c.name {
		case "rg", "sort", "man", "ag", "zip":
			a.programOption(v)
		case "fzf":
			// {} stands for each selected line.
			if strings.Contains(v.s, "{}") {
				v.s = strings.ReplaceAll(v.s, "{}", unkS)
				v.dyn = true
			}
			a.shellCode(v, desc{}, nil, false)
		default:
			a.shellCode(v, desc{}, nil, false)
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
