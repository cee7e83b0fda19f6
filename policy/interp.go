package policy

import (
	"encoding/base64"
	"path"
	"strings"
	"unicode/utf16"
)

// interpArgs is what an interpreter's command line says it runs.
type interpArgs struct {
	code    []field // -c / -e code
	script  *field  // script file
	stdin   bool    // reads its program from stdin
	inplace bool    // perl/ruby -i
	files   []field // arguments after the program
	module  bool    // python -m
}

func parseInterpArgs(name string, args []field) interpArgs {
	var r interpArgs
	i := 0
	codeNext := func(rest string) {
		if rest != "" {
			r.code = append(r.code, field{s: rest})
		} else if i+1 < len(args) {
			i++
			r.code = append(r.code, args[i])
		}
	}
	for ; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			i++
			break
		}
		if s == "-" {
			r.stdin = true
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' || args[i].dyn {
			break
		}
		switch name {
		case "python":
			if s == "-m" {
				r.module = true
				return r
			}
			if s == "-W" || s == "-X" || s == "-Q" {
				i++
				continue
			}
			if !strings.HasPrefix(s, "--") && strings.HasSuffix(s, "c") {
				codeNext("")
				r.files = args[min(i+1, len(args)):]
				return r
			}
		case "perl", "ruby":
			if strings.HasPrefix(s, "--") {
				continue
			}
		cluster:
			for j := 1; j < len(s); j++ {
				switch ch := s[j]; {
				case ch == 'e' || ch == 'E' && name == "perl":
					codeNext(s[j+1:])
					break cluster
				case ch == 'i':
					r.inplace = true
					break cluster
				case strings.IndexByte("MmIrxdDCFKT", ch) >= 0:
					if s[j+1:] == "" && strings.IndexByte("MmIr", ch) >= 0 && i+1 < len(args) {
						i++
					}
					break cluster
				}
			}
		case "node", "deno", "bun":
			switch {
			case s == "-e" || s == "--eval" || s == "-p" || s == "--print" || s == "-pe":
				codeNext("")
			case strings.HasPrefix(s, "--eval="):
				r.code = append(r.code, field{s: s[len("--eval="):]})
			case s == "-r" || s == "--require" || s == "--input-type" || s == "--import":
				i++
			}
		case "php":
			switch s {
			case "-r", "-B", "-R", "-E":
				codeNext("")
			case "-f":
				if i+1 < len(args) {
					r.script = &args[i+1]
					r.files = args[i+2:]
				}
				return r
			case "-d", "-c", "-z":
				i++
			}
		case "lua", "Rscript", "osascript", "expect", "julia":
			switch s {
			case "-e", "-c":
				codeNext("")
			case "-l":
				i++
			}
		case "awk":
			switch {
			case s == "-f" || s == "--file":
				if i+1 < len(args) {
					r.script = &args[i+1]
					i++
				}
			case s == "-e" || s == "--source":
				codeNext("")
			case s == "-F" || s == "-v" || s == "--assign" || s == "--field-separator":
				i++
			}
		case "pwsh", "powershell":
			ls := strings.ToLower(s)
			switch {
			case ls == "-c" || ls == "-command":
				r.code = append(r.code, joinFields(args[min(i+1, len(args)):]))
				return r
			case ls == "-e" || ls == "-enc" || strings.HasPrefix(ls, "-encodedcommand"):
				if i+1 < len(args) {
					if dec, ok := decodeUTF16Base64(args[i+1].s); ok {
						r.code = append(r.code, field{s: dec, t: tDecoded})
					}
					i++
				}
			case ls == "-file" || ls == "-f":
				if i+1 < len(args) {
					r.script = &args[i+1]
				}
				return r
			}
		}
	}
	rest := args[min(i, len(args)):]
	if len(r.code) > 0 {
		r.files = rest
		return r
	}
	if (name == "pwsh" || name == "powershell") && len(rest) > 0 && !strings.HasSuffix(strings.ToLower(rest[0].s), ".ps1") {
		// PowerShell runs words that are not a script file as a command
		// (powershell Remove-Item -Recurse x): the default parameter is -Command.
		r.code = append(r.code, joinFields(rest))
		return r
	}
	if name == "deno" && len(rest) > 1 && rest[0].s == "eval" {
		r.code = append(r.code, rest[1])
		return r
	}
	if name == "awk" && r.script == nil {
		if len(rest) > 0 {
			r.code = append(r.code, rest[0])
			r.files = rest[1:]
		}
		return r
	}
	if r.script == nil && len(rest) > 0 && !r.stdin {
		r.script = &rest[0]
		r.files = rest[1:]
		return r
	}
	if r.script == nil {
		r.stdin = true
	}
	return r
}

func decodeUTF16Base64(s string) (string, bool) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b)%2 != 0 {
		return "", false
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return string(utf16.Decode(u)), true
}

// interpCode returns the inline code of an interpreter command line.
func interpCode(name string, args []field) string {
	r := parseInterpArgs(name, args)
	parts := make([]string, len(r.code))
	for i, f := range r.code {
		parts[i] = f.s
	}
	return strings.Join(parts, "\n")
}

func (a *analyzer) interpreter(c *call) {
	lang := c.name
	if lang == "powershell" {
		lang = "pwsh"
	}
	r := parseInterpArgs(lang, c.args)
	if r.inplace {
		for _, f := range r.files {
			a.writeTarget(f, wEdit, desc{})
		}
	}
	for _, f := range r.code {
		if f.t&tRemote != 0 {
			a.add(rulePipeShell)
		}
		if f.t&tDecoded != 0 {
			a.add(ruleObfuscated)
		}
		if f.dyn && strings.Trim(f.s, unkS+" \t\n;") == "" {
			if f.t&(tRemote|tDecoded) == 0 {
				a.add(ruleEvalDynamic)
			}
			continue
		}
		a.analyzeCode(lang, f.s)
	}
	switch {
	case r.module:
	case r.script != nil:
		f := *r.script
		if f.proc != nil {
			a.codeStdin(lang, *f.proc)
			break
		}
		if f.s == "/dev/stdin" {
			a.codeStdin(lang, c.in)
			break
		}
		if !f.dyn {
			if frameworkDBDestroy(path.Base(f.s), r.files) {
				a.add(ruleDatabase)
			}
			d, known := a.runContent(a.target(f), lang)
			if d.t&tRemote != 0 {
				a.add(ruleDownloadExec)
			}
			if known {
				a.analyzeCode(lang, d.text)
			}
		}
	case r.stdin && len(r.code) == 0:
		a.stageShell = true
		a.codeStdin(lang, c.in)
	}
	for _, f := range r.files {
		if !f.dyn && a.isCredential(a.target(f)) {
			a.add(ruleReadCreds)
		}
	}
}

// codeStdin classifies a program an interpreter reads from stdin.
func (a *analyzer) codeStdin(lang string, in desc) {
	if in.t&tRemote != 0 {
		a.add(rulePipeShell)
	}
	if in.t&tDecoded != 0 {
		a.add(ruleObfuscated)
	}
	if in.known {
		a.analyzeCode(lang, in.text)
	}
}
