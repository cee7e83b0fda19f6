package policy

import (
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// wrapSpec describes a command that runs another command.
type wrapSpec struct {
	short string // short options that take a value
	long  string // long options that take a value, each followed by a space
	skip  int    // positional arguments before the command
	rule  ruleID // finding the wrapper itself adds, or numRules
}

func wrapSpecFor(name string) *wrapSpec {
	switch name {
	case "nohup", "setsid", "unbuffer", "fakeroot", "eatmydata", "catchsegv", "dbus-run-session",
		"torsocks", "tsocks", "builtin", "chronic", "ifne", "nocache", "rlwrap", "stdbuf", "time",
		"nice", "ionice", "timeout", "caffeinate", "proxychains", "proxychains4", "firejail",
		"valgrind", "cgexec", "chrt", "taskset", "numactl", "faketime", "strace", "ltrace", "xvfb-run",
		"screen", "doas", "pkexec", "systemd-run", "gtimeout", "sem":
	default:
		return nil
	}
	s := &wrapSpec{rule: numRules}
	switch name {
	case "stdbuf":
		s.short, s.long = "ioe", "input output error "
	case "time":
		s.short, s.long = "fo", "format output "
	case "nice":
		s.short, s.long = "n", "adjustment "
	case "ionice":
		s.short, s.long = "cnp", "class classdata pid "
	case "timeout", "gtimeout":
		s.short, s.long, s.skip = "sk", "signal kill-after ", 1
	case "caffeinate":
		s.short = "tw"
	case "proxychains", "proxychains4":
		s.short = "f"
	case "cgexec":
		s.short = "g"
	case "chrt", "faketime":
		s.skip = 1
	case "taskset":
		s.skip = 1
	case "numactl":
		s.short = "CNmiPp"
	case "strace", "ltrace":
		s.short = "oepsuEIabPXSnAD"
	case "xvfb-run":
		s.short = "nsfpew"
	case "screen":
		s.short = "SLpXceh"
	case "doas":
		s.short, s.rule = "uC", rulePrivilege
	case "pkexec":
		s.long, s.rule = "user ", rulePrivilege
	case "systemd-run":
		s.short = "pEuM"
		s.long = "unit property description slice uid gid nice working-directory setenv on-active on-boot " +
			"on-startup on-unit-active on-unit-inactive on-calendar timer-property path-property " +
			"socket-property service-type machine "
	}
	return s
}

// peelOptions skips the options of a wrapper and returns the rest.
func peelOptions(args []field, short, long string) []field {
	i := 0
	for i < len(args) {
		s := args[i].s
		if s == "--" {
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		if strings.HasPrefix(s, "--") {
			name, _, eq := strings.Cut(s[2:], "=")
			if !eq && long != "" && strings.Contains(" "+long, " "+name+" ") {
				i++
			}
			i++
			continue
		}
		for j := 1; j < len(s); j++ {
			if strings.IndexByte(short, s[j]) >= 0 {
				if j == len(s)-1 {
					i++
				}
				break
			}
		}
		i++
	}
	if i > len(args) {
		return nil
	}
	return args[i:]
}

func (a *analyzer) wrapper(c *call) {
	sp := wrapSpecFor(c.name)
	if sp.rule != numRules {
		a.add(sp.rule)
	}
	if c.name == "systemd-run" {
		for _, f := range c.args {
			if strings.HasPrefix(f.s, "--on-") {
				a.add(ruleCron)
			}
		}
	}
	rest := peelOptions(c.args, sp.short, sp.long)
	if sp.skip > 0 {
		if len(rest) <= sp.skip {
			return
		}
		rest = rest[sp.skip:]
	}
	a.exec(rest, c.in)
}

func (a *analyzer) env(c *call) {
	args := c.args
	for len(args) > 0 {
		s := args[0].s
		switch {
		case s == "--":
			args = args[1:]
			goto run
		case s == "-S" || s == "--split-string":
			if len(args) > 1 {
				a.shellCode(joinFields(args[1:]), c.in, nil, false)
			}
			return
		case strings.HasPrefix(s, "-S"):
			a.shellCode(joinFields(append([]field{{s: s[2:], dyn: args[0].dyn, t: args[0].t}}, args[1:]...)), c.in, nil, false)
			return
		case strings.HasPrefix(s, "--split-string="):
			a.shellCode(joinFields(append([]field{{s: s[len("--split-string="):], t: args[0].t}}, args[1:]...)), c.in, nil, false)
			return
		case s == "-u" || s == "--unset" || s == "-C" || s == "--chdir":
			if s == "-u" || s == "--unset" {
				if len(args) > 1 {
					a.checkEnv(args[1].s, field{}, false)
				}
			}
			args = args[min(2, len(args)):]
			continue
		case strings.HasPrefix(s, "-") && len(s) > 1:
			args = args[1:]
			continue
		case strings.Contains(s, "="):
			name, val, _ := strings.Cut(s, "=")
			a.checkEnv(name, field{s: val, dyn: args[0].dyn, t: args[0].t}, true)
			args = args[1:]
			continue
		}
		break
	}
run:
	a.exec(args, c.in)
}

func joinFields(fs []field) field {
	var f field
	parts := make([]string, len(fs))
	for i, g := range fs {
		parts[i] = g.s
		f.t |= g.t
		f.dyn = f.dyn || g.dyn
		f.subst = f.subst || g.subst
		f.posRef = f.posRef || g.posRef
	}
	f.s = strings.Join(parts, " ")
	return f
}

func (a *analyzer) sudo(c *call) {
	args := c.args
	listing := true
	i := 0
	for ; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		if strings.HasPrefix(s, "--") {
			switch {
			case s == "--stdin":
				a.add(ruleSudoStdin)
			case s == "--edit":
				a.editFiles(args[i+1:])
				a.add(rulePrivilege)
				return
			case s == "--user" || s == "--group" || s == "--prompt" || s == "--close-from" || s == "--chdir" ||
				s == "--host" || s == "--role" || s == "--type" || s == "--other-user" ||
				s == "--command-timeout":
				i++
			}
			if s != "--list" && s != "--validate" && s != "--reset-timestamp" && s != "--remove-timestamp" && s != "--version" && s != "--help" {
				listing = false
			}
			continue
		}
		for j := 1; j < len(s); j++ {
			ch := s[j]
			if ch == 'S' {
				a.add(ruleSudoStdin)
			}
			if ch == 'e' {
				a.editFiles(args[i+1:])
				a.add(rulePrivilege)
				return
			}
			if !strings.ContainsRune("lvkKVh", rune(ch)) {
				listing = false
			}
			if strings.IndexByte("ugCDhprtTU", ch) >= 0 && ch != 'h' {
				if j == len(s)-1 {
					i++
				}
				break
			}
		}
	}
	rest := args[min(i, len(args)):]
	if len(rest) == 0 && listing {
		return
	}
	a.add(rulePrivilege)
	a.exec(rest, c.in)
}

func (a *analyzer) su(c *call) {
	a.add(rulePrivilege)
	for i := 0; i < len(c.args); i++ {
		s := c.args[i].s
		switch {
		case s == "-c" || s == "--command" || s == "--session-command":
			if i+1 < len(c.args) {
				a.shellCode(c.args[i+1], c.in, nil, false)
			}
			return
		case strings.HasPrefix(s, "--command="):
			f := c.args[i]
			f.s = s[len("--command="):]
			a.shellCode(f, c.in, nil, false)
			return
		case s == "-s" || s == "--shell" || s == "-g" || s == "-G" || s == "--group" || s == "--supp-group" || s == "-w" || s == "--whitelist-environment":
			i++
		}
	}
}

func (a *analyzer) runuser(c *call) {
	a.add(rulePrivilege)
	for i := 0; i < len(c.args); i++ {
		s := c.args[i].s
		switch s {
		case "-c", "--command":
			if i+1 < len(c.args) {
				a.shellCode(c.args[i+1], c.in, nil, false)
			}
			return
		case "-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w":
			i++
		case "--":
			a.exec(c.args[i+1:], c.in)
			return
		}
	}
}

func (a *analyzer) execBuiltin(c *call) {
	rest := peelOptions(c.args, "a", "")
	a.exec(rest, c.in)
}

func (a *analyzer) command(c *call) {
	for _, f := range c.args {
		if f.s == "-v" || f.s == "-V" {
			return
		}
		if !strings.HasPrefix(f.s, "-") {
			break
		}
	}
	a.exec(peelOptions(c.args, "", ""), c.in)
}

func (a *analyzer) busybox(c *call) {
	if len(c.args) > 0 && !strings.HasPrefix(c.args[0].s, "-") {
		a.exec(c.args, c.in)
	}
}

func (a *analyzer) watch(c *call) {
	exec := false
	i := 0
	for ; i < len(c.args); i++ {
		s := c.args[i].s
		if s == "--" {
			i++
			break
		}
		if !strings.HasPrefix(s, "-") {
			break
		}
		if s == "-x" || s == "--exec" {
			exec = true
		}
		if s == "-n" || s == "--interval" || s == "-q" || s == "--equexit" {
			i++
		}
	}
	rest := c.args[min(i, len(c.args)):]
	if exec {
		a.exec(rest, c.in)
		return
	}
	if len(rest) > 0 {
		a.shellCode(joinFields(rest), c.in, nil, false)
	}
}

func (a *analyzer) flock(c *call) {
	for i := 0; i < len(c.args); i++ {
		s := c.args[i].s
		switch {
		case s == "-c" || s == "--command":
			if i+1 < len(c.args) {
				a.shellCode(c.args[i+1], c.in, nil, false)
			}
			return
		case s == "-w" || s == "--timeout" || s == "-E" || s == "--conflict-exit-code":
			i++
		case !strings.HasPrefix(s, "-"):
			rest := c.args[i+1:]
			if len(rest) > 1 && (rest[0].s == "-c" || rest[0].s == "--command") {
				a.shellCode(rest[1], c.in, nil, false)
				return
			}
			a.exec(rest, c.in)
			return
		}
	}
}

func (a *analyzer) sg(c *call) {
	if len(c.args) < 2 {
		return
	}
	rest := c.args[1:]
	if rest[0].s == "-c" {
		rest = rest[1:]
	}
	a.shellCode(joinFields(rest), c.in, nil, false)
}

func (a *analyzer) scriptCmd(c *call) {
	for i := 0; i < len(c.args)-1; i++ {
		s := c.args[i].s
		if s == "--command" || len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.HasSuffix(s, "c") {
			a.shellCode(c.args[i+1], c.in, nil, false)
			i++
		}
	}
}

func (a *analyzer) nixShell(c *call) {
	for i := 0; i < len(c.args)-1; i++ {
		if s := c.args[i].s; s == "--run" || s == "--command" {
			a.shellCode(c.args[i+1], c.in, nil, false)
		}
	}
}

// runSub handles "uv run", "poetry run", "bundle exec", "conda run -n x",
// "direnv exec DIR", "nix develop -c" and the like.
func (a *analyzer) runSub(c *call) {
	if len(c.args) == 0 {
		return
	}
	switch c.args[0].s {
	case "run", "exec", "develop", "shell":
	default:
		return
	}
	args := c.args[1:]
	if c.name == "direnv" && len(args) > 0 {
		args = args[1:]
	}
	if c.name == "nix" {
		for i, f := range args {
			if f.s == "-c" || f.s == "--command" {
				a.exec(args[i+1:], c.in)
				return
			}
		}
		return
	}
	a.exec(peelOptions(args, "npe", "with python env-file directory project group extra package index name prefix "), c.in)
}

func (a *analyzer) tmux(c *call) {
	if len(c.args) == 0 {
		return
	}
	sub := c.args[0].s
	rest := c.args[1:]
	switch sub {
	case "send-keys", "send":
		var keys []field
		for i := 0; i < len(rest); i++ {
			s := rest[i].s
			if s == "-t" {
				i++
				continue
			}
			if strings.HasPrefix(s, "-") || s == "Enter" || s == "C-m" {
				continue
			}
			keys = append(keys, rest[i])
		}
		if len(keys) > 0 {
			a.shellCode(joinFields(keys), desc{}, nil, false)
		}
	case "new-session", "new", "new-window", "neww", "split-window", "splitw", "run-shell", "run":
		cmd := peelOptions(rest, "tsnxyFcecl", "")
		if len(cmd) > 0 {
			a.shellCode(joinFields(cmd), desc{}, nil, false)
		}
	}
}

func (a *analyzer) parallel(c *call) {
	var cmd, items []field
	seenSep := false
	for _, f := range peelOptions(c.args, "jSn", "jobs ") {
		if f.s == ":::" || f.s == "::::" {
			seenSep = true
			continue
		}
		if seenSep {
			items = append(items, f)
		} else {
			cmd = append(cmd, f)
		}
	}
	if len(cmd) == 0 {
		return
	}
	text := joinFields(cmd)
	if len(items) == 0 {
		a.shellCode(text, c.in, nil, false)
		return
	}
	for i, it := range items {
		if i >= maxLoopItems {
			break
		}
		f := text
		if strings.Contains(f.s, "{}") {
			f.s = strings.ReplaceAll(f.s, "{}", sandbox.ShellQuote(it.s))
		} else {
			f.s += " " + sandbox.ShellQuote(it.s)
		}
		a.shellCode(f, c.in, nil, false)
	}
}

func (a *analyzer) at(c *call) {
	for _, f := range c.args {
		switch f.s {
		case "-l", "-c", "-V", "--help":
			return
		case "-r", "-d":
			a.add(ruleCron)
			return
		}
	}
	a.add(ruleCron)
	a.shellStdin(c.in)
}

// xargs runs its command with arguments read from stdin.
func (a *analyzer) xargs(c *call) {
	repl := ""
	nul := false
	i := 0
	args := c.args
	for ; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		switch {
		case s == "-I" || s == "--replace":
			if s == "-I" && i+1 < len(args) {
				repl = args[i+1].s
				i++
			} else {
				repl = "{}"
			}
		case strings.HasPrefix(s, "-I"):
			repl = s[2:]
		case strings.HasPrefix(s, "--replace="):
			repl = s[len("--replace="):]
		case s == "-i":
			repl = "{}"
		case s == "-0" || s == "--null":
			nul = true
		case s == "-n" || s == "-L" || s == "-P" || s == "-s" || s == "-d" || s == "-E" || s == "-a" ||
			s == "--arg-file" || s == "--delimiter" || s == "--max-args" || s == "--max-procs" ||
			s == "--max-lines":
			i++
		}
	}
	cmd := args[min(i, len(args)):]
	if len(cmd) == 0 {
		cmd = []field{lit("echo")}
	}
	var items []field
	switch {
	case c.in.known:
		sep := " \t\n"
		if nul {
			sep = "\x00\n"
		}
		for _, s := range strings.FieldsFunc(c.in.text, func(r rune) bool { return strings.ContainsRune(sep, r) }) {
			items = append(items, field{s: s, t: c.in.t, dyn: strings.Contains(s, unkS)})
			if len(items) >= maxLoopItems {
				break
			}
		}
	case c.in.hint != "":
		items = []field{{s: c.in.hint, t: c.in.t}}
	default:
		// Unknown data (a file, a listing, the network, a decoder or a
		// secret): the command's arguments are unresolved and carry its taint.
		items = []field{{s: unkS, dyn: true, subst: true, t: c.in.t}}
	}
	a.forking++
	a.bulk++
	defer func() { a.forking--; a.bulk-- }()
	if repl == "" {
		a.exec(append(append([]field(nil), cmd...), items...), desc{})
		return
	}
	if len(items) == 0 {
		items = []field{{s: unkS, dyn: true, t: c.in.t}}
	}
	for _, it := range items {
		argv := make([]field, len(cmd))
		for j, f := range cmd {
			if strings.Contains(f.s, repl) {
				f.s = strings.ReplaceAll(f.s, repl, it.s)
				f.t |= it.t
				f.dyn = f.dyn || it.dyn
			}
			argv[j] = f
		}
		a.exec(argv, desc{})
	}
}

// Shells.
