package policy

import "strings"

// sed scripts are a small language of their own: GNU sed's e command and
// the e flag of s run shell commands, w and W (and the w flag of s) write
// any file, r and R read one. sedProgram finds those commands in a script.

// sedProgram is what a sed script does beyond editing its input.
type sedProgram struct {
	execs  []string // e COMMAND texts; "" when e runs the pattern space itself
	sExecs []string // replacements of s///e: the pattern space after them is run
	writes []string // files written by w, W and s///w
	reads  []string // files read by r and R
}

// scanSed reads a sed script. Unknown text is skipped command by command,
// so a malformed script is read as far as sed itself would run it.
func scanSed(script string) sedProgram {
	var p sedProgram
	s := script
	i := 0
	skipSpace := func() {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	// toEOL returns the rest of the line (a file name or a command).
	toEOL := func() string {
		skipSpace()
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = len(s) - i
		}
		v := s[i : i+j]
		i += j
		return v
	}
	// delimited skips text up to an unescaped delim and returns it.
	delimited := func(delim byte) string {
		var b strings.Builder
		for i < len(s) {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				if s[i+1] != delim {
					b.WriteByte('\\')
				}
				b.WriteByte(s[i+1])
				i += 2
				continue
			}
			i++
			if c == delim {
				break
			}
			b.WriteByte(c)
		}
		return b.String()
	}
	address := func() {
		for n := 0; n < 2 && i < len(s); n++ {
			switch c := s[i]; {
			case c >= '0' && c <= '9' || c == '$' || c == '+' || c == '~':
				for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '$' || s[i] == '+' || s[i] == '~') {
					i++
				}
			case c == '/':
				i++
				delimited('/')
			case c == '\\' && i+1 < len(s):
				i += 2
				delimited(s[i-1])
			default:
				n = 2
				continue
			}
			for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
			skipSpace()
			if i < len(s) && s[i] == ',' {
				i++
				skipSpace()
				continue
			}
			break
		}
		skipSpace()
		for i < len(s) && s[i] == '!' {
			i++
			skipSpace()
		}
	}
	for i < len(s) {
		for i < len(s) && strings.IndexByte(" \t\n;{}", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '#' {
			toEOL()
			continue
		}
		address()
		if i >= len(s) {
			break
		}
		cmd := s[i]
		i++
		switch cmd {
		case 'e':
			p.execs = append(p.execs, strings.TrimSpace(toEOL()))
		case 'w', 'W':
			p.writes = append(p.writes, toEOL())
		case 'r', 'R':
			p.reads = append(p.reads, toEOL())
		case 'a', 'i', 'c':
			// Text to the end of the line (GNU one-line form), with
			// backslash-newline continuing it.
			for {
				t := toEOL()
				if !strings.HasSuffix(t, "\\") || i >= len(s) {
					break
				}
				i++
			}
		case ':', 'b', 't', 'T':
			for i < len(s) && s[i] != ';' && s[i] != '\n' {
				i++
			}
		case 's', 'y':
			if i >= len(s) || s[i] == '\n' || s[i] == '\\' {
				continue
			}
			delim := s[i]
			i++
			delimited(delim)
			repl := delimited(delim)
			if cmd == 'y' {
				continue
			}
			exec := false
			for i < len(s) && strings.IndexByte("gpiImMe0123456789w", s[i]) >= 0 {
				c := s[i]
				i++
				if c == 'e' {
					exec = true
				}
				if c == 'w' {
					p.writes = append(p.writes, toEOL())
					break
				}
			}
			if exec {
				p.sExecs = append(p.sExecs, repl)
			}
		}
	}
	return p
}

// sedScripts returns the script texts of a sed command line: the values of
// -e/--expression, the contents of -f/--file files where known, or else
// the first operand; and the remaining operands (the input files).
func (a *analyzer) sedScripts(args []field) (scripts []field, files []field, inplace bool) {
	p, _ := grammars["sed"].read(args)
	given := false
	for _, o := range p.opts {
		switch o.name {
		case "-e", "--expression":
			given = true
			if o.has {
				scripts = append(scripts, o.val)
			}
		case "-f", "--file":
			given = true
			if !o.has {
				continue
			}
			d := a.fileContent(o.val)
			if !d.known {
				a.want(a.target(o.val), "data")
				continue
			}
			scripts = append(scripts, field{s: d.text})
		case "-i", "--in-place":
			inplace = true
		}
	}
	files = p.pos
	if !given && len(files) > 0 {
		scripts, files = append(scripts, files[0]), files[1:]
	}
	return scripts, files, inplace
}

// sedProgramRules applies the rules to what sed scripts run, write and read.
func (a *analyzer) sedProgramRules(scripts []field) {
	for _, sc := range scripts {
		if sc.dyn {
			continue
		}
		p := scanSed(sc.s)
		for _, e := range p.execs {
			if e == "" {
				a.add(ruleDynamicCommand) // runs the pattern space: the input decides
				continue
			}
			a.programOption(field{s: e})
		}
		for _, r := range p.sExecs {
			// The replacement becomes the command (where the match is the
			// whole line, exactly); the input decides the rest.
			a.shellCode(field{s: r}, desc{}, nil, false)
			a.add(ruleDynamicCommand)
		}
		for _, w := range p.writes {
			switch w {
			case "/dev/stdout", "/dev/stderr":
				continue
			}
			a.writeTarget(field{s: a.expandHome(w)}, wCopy, desc{})
		}
		for _, r := range p.reads {
			if r == "" || r == "/dev/stdin" {
				continue
			}
			if a.isCredential(a.target(field{s: a.expandHome(r)})) {
				a.add(ruleReadCreds)
			}
		}
	}
}
