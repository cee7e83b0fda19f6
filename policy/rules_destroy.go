package policy

import (
	"path"
	"strconv"
	"strings"
)

// Destruction outside the obvious spellings (emptying files, archiving
// that deletes, recursive permission changes, version-control history) and
// resource exhaustion (filling the disk or memory without a bound).

// regenerableDirs are directories that a build or package manager
// recreates: deleting them is routine wherever they are.
var regenerableDirs = map[string]bool{
	"node_modules": true, "dist": true, "build": true, "target": true, ".next": true, ".nuxt": true, "out": true,
	"__pycache__": true, ".pytest_cache": true, ".mypy_cache": true, ".ruff_cache": true, ".venv": true, "venv": true,
	".tox": true, "coverage": true, ".nyc_output": true, ".gradle": true, ".terraform": true, ".parcel-cache": true,
	".turbo": true, ".svelte-kit": true, ".angular": true, "obj": true, "DerivedData": true,
	"_build": true, "deps": true, ".dart_tool": true, ".eggs": true, "htmlcov": true,
}

// regenerable reports whether t, outside the working tree, is a build
// output, dependency directory or cache that is safe to delete.
func (a *analyzer) regenerable(t target) bool {
	if t.dyn || t.glob {
		return false
	}
	// Build outputs and dependency directories of a project under home.
	// Shared caches (~/.cache, ~/.npm) are not included: wiping them is a
	// choice for the person, not routine work in one project.
	rel, ok := a.homeRel(t.p)
	if !ok || strings.Count(rel, "/") < 2 || strings.HasPrefix(rel, ".") {
		return false
	}
	return regenerableDirs[path.Base(rel)]
}

// vcsDirs hold version-control history.
var vcsDirs = map[string]bool{".git": true, ".hg": true, ".svn": true, ".bzr": true, "_darcs": true, ".fossil": true}

// everythingHere are delete targets that name the whole current directory
// or its parent.
var everythingHere = map[string]bool{"*": true, "./*": true, ".": true, "./": true, "..": true, "../": true, "../*": true, "./.*": true, ".*": true, "* .*": true}

// dataFileExts are extensions of databases and documents.
var dataFileExts = map[string]bool{
	".db": true, ".sqlite": true, ".sqlite3": true, ".mdb": true, ".accdb": true, ".docx": true, ".doc": true,
	".xlsx": true, ".xls": true, ".pptx": true, ".pdf": true, ".tex": true, ".odt": true, ".ods": true, ".kdbx": true,
	".pages": true, ".numbers": true, ".rtf": true, ".parquet": true, ".ledger": true,
}

// truncateTarget judges emptying f (": > f", "truncate -s 0 f", "cp
// /dev/null f"). Logs and temp files are emptied routinely.
func (a *analyzer) truncateTarget(f field) {
	if f.s == "" || f.proc != nil || isFD(f.s) {
		return
	}
	if f.dyn {
		a.add(ruleTruncate)
		return
	}
	t := a.target(f)
	base := path.Base(t.p)
	if strings.HasPrefix(t.p, "/dev/") || isTemp(t.p) || strings.Contains(base, ".log") || strings.HasSuffix(base, ".out") ||
		strings.HasSuffix(base, ".tmp") || strings.HasSuffix(base, ".lock") || strings.HasSuffix(base, ".pid") {
		return
	}
	// Inside the working tree, emptying a file is routine (": > .gitkeep")
	// unless it holds data or a document.
	if a.inside(t) && !dataFileExts[strings.ToLower(path.Ext(base))] {
		return
	}
	a.add(ruleTruncate)
}

// outsideHome reports whether t is in the home directory (or is it) and
// outside the working tree: a user's documents and settings.
func (a *analyzer) outsideHome(t target) bool {
	if t.dyn {
		return false
	}
	_, ok := a.homeRel(t.p)
	return ok && !a.inside(t) && !isTemp(t.p)
}

// parseSize reads a size such as 900G, 1T, 512M or 100 (bytes).
func parseSize(s string) (int64, bool) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := int64(1)
	if s == "" {
		return 0, false
	}
	switch s[len(s)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	case 'P', 'E', 'Z', 'Y':
		mult = 1 << 50
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return int64(n * float64(mult)), true
}

// hugeSize is the size past which filling a file counts as exhausting the disk.
const hugeSize = 50 << 30

func isEndless(p string) bool {
	return p == "/dev/zero" || p == "/dev/urandom" || p == "/dev/random" || p == "/dev/full"
}

// destroyRules applies the destruction and exhaustion rules that need more
// than the command's own handler.
func (a *analyzer) destroyRules(c *call) {
	switch c.name {
	case "truncate":
		p := optSpecs["truncate"].parse(c.args)
		if v, ok := p.value("-s", "--size"); ok {
			if n, ok := parseSize(strings.TrimLeft(v.s, "<>/%=")); ok && n == 0 && !strings.HasPrefix(v.s, "+") {
				for _, f := range p.pos {
					a.truncateTarget(f)
				}
			}
			if n, ok := parseSize(strings.TrimLeft(v.s, "+")); ok && n >= hugeSize {
				// A sparse file takes no space until written; only flag the absurd.
				if n >= 1<<40 {
					a.add(ruleFillDisk)
				}
			}
		}
	case "fallocate":
		p := optSpecs["fallocate"].parse(c.args)
		if v, ok := p.value("-l", "--length"); ok {
			if n, ok := parseSize(v.s); ok && n >= hugeSize {
				a.add(ruleFillDisk)
			}
		}
	case "shred":
		for _, f := range nonOptions(c.args, "nsx") {
			if !strings.HasPrefix(f.s, "/dev/") && !strings.HasPrefix(f.s, "-") && (f.dyn || !a.inside(a.target(f))) {
				a.truncateTarget(f)
			}
		}
	case "tar", "bsdtar":
		for _, f := range c.args {
			if f.s == "--remove-files" {
				a.add(ruleArchiveRemove)
			}
		}
	case "zip":
		for _, f := range c.args {
			if f.s == "-m" || f.s == "--move" {
				a.add(ruleArchiveRemove)
			}
		}
	case "chmod", "chown", "chgrp":
		p := optSpecs[c.name].parse(c.args)
		if !p.has("-R", "--recursive") || len(p.pos) < 2 {
			return
		}
		for _, f := range p.pos[1:] {
			t := a.target(f)
			if !f.dyn && (a.isHomeDir(t.p) || a.outsideHome(t) && !a.regenerable(t)) {
				a.add(ruleChmodOutside)
			}
		}
	case "rm", "unlink", "srm":
		recursive := false
		for _, f := range c.args {
			if f.s == "--recursive" || len(f.s) > 1 && f.s[0] == '-' && f.s[1] != '-' && strings.ContainsAny(f.s, "rR") {
				recursive = true
			}
		}
		for _, f := range c.args {
			if recursive && (f.glob || !strings.Contains(f.s, "*")) && everythingHere[f.s] && a.cwd == "" && !a.cwdDyn {
				a.add(ruleDeleteAllHere)
			}
			if !f.dyn && vcsDirs[path.Base(path.Clean(f.s))] && recursive {
				a.add(ruleDeleteVCS)
			}
		}
	case "cp":
		files, dst := copyArgs(c.args, "STgmob")
		if len(files) == 1 && (files[0].s == "/dev/null" || isEndless(files[0].s)) && !strings.HasPrefix(dst.s, "/dev/") {
			if isEndless(files[0].s) {
				a.add(ruleFillDisk)
			} else {
				a.truncateTarget(dst)
			}
		}
	case "mv":
		files, dst := copyArgs(c.args, "S")
		if dst.s == "/dev/null" {
			for _, f := range files {
				if !isTemp(a.target(f).p) {
					a.add(ruleTruncate)
				}
			}
		}
	case "find":
		roots, filtered, _ := findParse(c.args)
		if filtered || a.cwd != "" || a.cwdDyn {
			return
		}
		for _, f := range c.args {
			if f.s == "-delete" {
				for _, r := range roots {
					if r.s == "." || r.s == "./" {
						a.add(ruleDeleteAllHere)
					}
				}
			}
		}
	case "rsync":
		del := false
		var pos []field
		for _, f := range c.args {
			if strings.HasPrefix(f.s, "--del") {
				del = true
			} else if !strings.HasPrefix(f.s, "-") {
				pos = append(pos, f)
			}
		}
		if del && len(pos) > 1 && everythingHere[pos[len(pos)-1].s] && a.cwd == "" && !a.cwdDyn {
			a.add(ruleDeleteAllHere)
		}
	case "less", "more", "most":
		a.editorCommands(c.args)
	case "make", "gmake":
		for i, f := range c.args {
			if (f.s == "-f" || f.s == "--file" || f.s == "--makefile") && i+1 < len(c.args) && (c.args[i+1].s == "-" || c.args[i+1].s == "/dev/stdin") {
				if !c.in.known {
					a.add(ruleStdinScript)
					return
				}
				for _, line := range strings.Split(c.in.text, "\n") {
					if strings.HasPrefix(line, "\t") {
						a.shellCode(field{s: strings.TrimLeft(strings.TrimSpace(line), "@-+")}, desc{}, nil, false)
					}
				}
			}
		}
	case "stress", "stress-ng":
		timed := false
		for i, f := range c.args {
			s := f.s
			if (s == "-t" || s == "--timeout") && i+1 < len(c.args) {
				timed = c.args[i+1].s != "0"
			}
			if strings.HasPrefix(s, "--timeout=") {
				timed = s != "--timeout=0"
			}
		}
		if !timed && len(c.args) > 0 {
			a.add(ruleFillDisk)
		}
	}
}
