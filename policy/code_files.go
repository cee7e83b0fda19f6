package policy

import "strings"

// File operations and process signals in interpreter code.

func (a *analyzer) expandHome(s string) string {
	if strings.HasPrefix(s, "~/") || s == "~" {
		return a.c.home + s[1:]
	}
	return s
}

// codeFileOps maps file APIs onto the delete and write rules.
func (a *analyzer) codeFileOps(key, code string, lits []codeLit) {
	pathArg := func(span [2]int) (field, bool) {
		s := concatArgHome(code, firstArgSpan(code, span, lits), lits, a.c.home)
		if s == "" || !looksLikePath(strings.ReplaceAll(s, unkS, "x/")) {
			return field{}, false
		}
		s = a.expandHome(s)
		return field{s: s, dyn: strings.Contains(s, unkS)}, true
	}
	deletes, recursive := false, false
	for _, name := range [...]string{"rmtree", "rm_rf", "rm_r", "remove_tree", "rmSync", "removeSync", "rmdirSync", "rimraf", "rmrf", "deleteRecursively", "rm", "remove_dir_all", "RemoveAll"} {
		for _, span := range callSites(code, name, lits, key == "perl") {
			recursive = true
			if f, ok := pathArg(span); ok {
				a.deleteTarget(f, delOpts{recursive: true, force: true})
			}
		}
	}
	for _, name := range [...]string{"remove", "unlink", "unlinkSync", "rmdir", "delete", "truncate"} {
		deletes = deletes || hasWord(code, name)
		for _, span := range callSites(code, name, lits, key == "perl") {
			if f, ok := pathArg(span); ok {
				a.deleteTarget(f, delOpts{})
			}
		}
	}
	if deletes || recursive {
		// Files found by a glob in code that deletes: unlink glob("~/.ssh/*"),
		// [os.remove(f) for f in glob.glob("/etc/*.conf")].
		for _, name := range [...]string{"glob", "iglob"} {
			for _, span := range callSites(code, name, lits, key == "perl") {
				if f, ok := pathArg(span); ok {
					f.glob = strings.ContainsAny(f.s, "*?[")
					a.deleteTarget(f, delOpts{recursive: recursive, force: true}) // every file the glob finds
				}
			}
		}
	}
	for _, name := range []string{
		"open", "fopen", "writeFileSync", "appendFileSync", "writeFile", "appendFile", "File.write",
		"IO.write", "file_put_contents", "createWriteStream", "copyfile", "copy", "copy2", "move",
		"rename", "symlink",
	} {
		for _, span := range callSites(code, name, lits, key == "perl") {
			var in []codeLit
			for _, l := range lits {
				if l.start >= span[0] && l.end <= span[1] {
					in = append(in, l)
				}
			}
			if len(in) == 0 {
				continue
			}
			switch name {
			case "open", "fopen":
				var p string
				writing := false
				for _, l := range in {
					v := strings.TrimSpace(l.val)
					switch {
					case v == "w" || v == "a" || v == "wb" || v == "ab" || v == "w+" || v == "a+" || v == "r+" || v == "x" || v == ">" || v == ">>" || v == "+>" || v == "wt" || v == "at":
						writing = true
					case strings.HasPrefix(v, ">"):
						writing = true
						p = strings.TrimSpace(strings.TrimLeft(v, ">+"))
					case p == "" && looksLikePath(v):
						p = v
					}
				}
				if writing && p != "" {
					a.writeTarget(lit(a.expandHome(p)), wEdit, desc{})
				}
			case "copyfile", "copy", "copy2", "move", "rename", "symlink":
				if len(in) >= 2 && looksLikePath(in[1].val) {
					a.writeTarget(lit(a.expandHome(in[1].val)), wCopy, desc{})
				}
			default:
				if looksLikePath(in[0].val) {
					a.writeTarget(lit(a.expandHome(in[0].val)), wEdit, desc{})
				}
			}
		}
	}
	for _, name := range [...]string{"write_text", "write_bytes", "touch"} {
		for off := 0; ; {
			i := strings.Index(code[off:], "."+name+"(")
			if i < 0 {
				break
			}
			i += off
			off = i + 1
			for k := len(lits) - 1; k >= 0; k-- {
				if lits[k].end <= i {
					if looksLikePath(lits[k].val) {
						a.writeTarget(lit(a.expandHome(lits[k].val)), wEdit, desc{})
					}
					break
				}
			}
		}
	}
}

func looksLikePath(s string) bool {
	return s != "" && !strings.ContainsAny(s, "\n\x00") && (strings.HasPrefix(s, "/") || strings.HasPrefix(s, "~") ||
		strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, ".") && len(s) > 1 ||
		strings.Contains(s, "/") && !strings.Contains(s, " "))
}

// codeKillsAll reports whether code signals pid -1, that is every process:
// os.kill(-1, 9), perl's kill 9, -1, Process.kill(:KILL, -1).
func codeKillsAll(code string) bool {
	for off := 0; off < len(code); {
		i := strings.Index(code[off:], "kill")
		if i < 0 {
			return false
		}
		i += off
		off = i + len("kill")
		if i > 0 && isIdent(code[i-1]) || off < len(code) && isIdent(code[off]) {
			continue
		}
		end := strings.IndexAny(code[off:], ";\n)")
		if end < 0 {
			end = len(code) - off
		}
		all, probe := false, false
		for _, arg := range strings.Split(code[off:off+end], ",") {
			switch strings.Trim(arg, " \t([") {
			case "-1":
				all = true
			case "0", "'0'", "\"0\"":
				probe = true // signal 0 only checks that processes exist
			}
		}
		if all && !probe {
			return true
		}
	}
	return false
}
