package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Option grammars: how each program the policy reasons about reads its
// own arguments. A word is an option, the value of an option, the "--"
// that ends the options, or an operand. The analysis of "this option runs
// a program" or "this option writes a file" looks at words read as
// options only, so "rg -- --pre sh" (a search for "--pre") and
// "sort -o --compress-program names" (an output file with an odd name) are
// not mistaken for the options they spell.

// WordKind is how a program reads one of its argument words.
type WordKind string

// The kinds of word.
const (
	WordOption   WordKind = "option"       // an option, or a cluster of short options
	WordValue    WordKind = "option-value" // the separate value of the option before it
	WordEnd      WordKind = "end-of-options"
	WordOperand  WordKind = "operand"
	WordCommand  WordKind = "command" // the program name
	WordUnparsed WordKind = "unknown" // no grammar is known for the program
)

// WordReading is the reading of one argument word.
type WordReading struct {
	Word   string   `json:"word"`
	Kind   WordKind `json:"kind"`
	Option string   `json:"option,omitempty"` // canonical names ("--compress-program", "-o -f")
	Value  string   `json:"value,omitempty"`  // a value attached to the option ("--pre=sh", "-ofile")
}

// read splits args into options and operands and says how each word was
// read. "--" ends the options; a lone "-" is an operand.
func (sp *optSpec) read(args []field) (parsedArgs, []WordReading) {
	var p parsedArgs
	rd := make([]WordReading, len(args))
	for i := range args {
		rd[i] = WordReading{Word: args[i].s, Kind: WordOperand}
	}
	for i := 0; i < len(args); i++ {
		f := args[i]
		s := f.s
		if s == "--" && !f.dyn {
			rd[i].Kind = WordEnd
			p.pos = append(p.pos, args[i+1:]...)
			break
		}
		if f.dyn || len(s) < 2 || s[0] != '-' {
			p.pos = append(p.pos, f)
			continue
		}
		rd[i].Kind = WordOption
		long := strings.HasPrefix(s, "--")
		body := s[1:]
		if long {
			body = s[2:]
		}
		if long || sp.single && sp.isLong(body) {
			name, val, eq := strings.Cut(body, "=")
			full, valued := sp.expandLong(name)
			o := opt{name: "--" + full, at: i}
			switch {
			case eq:
				v := f
				v.s = val
				o.val, o.has = v, true
				rd[i].Value = val
			case valued && i+1 < len(args):
				i++
				o.val, o.has = args[i], true
				rd[i].Kind, rd[i].Option = WordValue, o.name
			}
			rd[o.at].Option = o.name
			p.opts = append(p.opts, o)
			continue
		}
		var names []string
		for j := 1; j < len(s); j++ {
			o := opt{name: "-" + s[j:j+1], at: i}
			names = append(names, o.name)
			valued := strings.IndexByte(sp.short, s[j]) >= 0
			optional := strings.IndexByte(sp.optShort, s[j]) >= 0
			if !valued && !optional {
				p.opts = append(p.opts, o)
				continue
			}
			switch {
			case j+1 < len(s):
				v := f
				v.s = s[j+1:]
				o.val, o.has = v, true
				rd[i].Value = v.s
			case valued && i+1 < len(args):
				i++
				o.val, o.has = args[i], true
				rd[i].Kind, rd[i].Option = WordValue, o.name
			}
			p.opts = append(p.opts, o)
			break
		}
		rd[p.opts[len(p.opts)-1].at].Option = strings.Join(names, " ")
	}
	return p, rd
}

// isLong reports whether name (after one dash, maybe with "=value") is one
// of the long options of a spec whose long options take one dash.
func (sp *optSpec) isLong(body string) bool {
	name, _, _ := strings.Cut(body, "=")
	if len(name) < 2 && !contains(sp.long, name) && !contains(sp.flags, name) {
		return false
	}
	full, _ := sp.expandLong(name)
	return contains(sp.long, full) || contains(sp.flags, full)
}

// runOpt is an option whose value is a program or shell text to run.
type runOpt struct {
	shell bool // the value is shell text, not a program name (+ arguments)
	rest  bool // the command is the words after the option (fd -x cmd args ;)
	lang  string
	// bare: the option takes no value and itself makes the program run
	// others (rg -z runs a decompressor, found on PATH, for each file).
	bare bool
	// writes: the value is a file the program writes its output to.
	writes bool
}

// grammars are the option grammars of programs whose options run other
// programs. Keys are normalised command names.
var grammars = map[string]*optSpec{
	"rg": {
		short: "ABCEfgjMmrtTed",
		long: []string{
			"after-context", "before-context", "context", "color", "colors", "context-separator",
			"dfa-size-limit", "encoding", "engine", "file", "field-context-separator",
			"field-match-separator", "glob", "iglob", "ignore-file", "threads", "max-columns", "max-count",
			"max-depth", "maxdepth", "max-filesize", "path-separator", "pre", "pre-glob", "replace",
			"regex-size-limit", "regexp", "sort", "sortr", "type", "type-not", "type-add", "type-clear",
			"hostname-bin", "hyperlink-format", "generate",
		},
	},
	"sort": {
		short: "koStT",
		long: []string{
			"key", "output", "buffer-size", "field-separator", "temporary-directory", "batch-size",
			"compress-program", "files0-from", "parallel", "random-source", "sort",
		},
		flags: []string{
			"ignore-leading-blanks", "dictionary-order", "ignore-case", "general-numeric-sort",
			"ignore-nonprinting", "month-sort", "human-numeric-sort", "numeric-sort", "random-sort",
			"reverse", "version-sort", "check", "merge", "stable", "unique", "zero-terminated", "debug",
			"help", "version",
		},
		abbrev: true,
	},
	"ag": {
		short: "ABCGgmpW",
		long: []string{
			"color-line-number", "color-match", "color-path", "depth", "file-search-regex", "ignore",
			"ignore-dir", "max-count", "path-to-ignore", "pager", "width", "workers",
		},
		flags: []string{
			"after", "before", "context", "ackmate", "all-text", "all-types", "break", "nobreak", "case-sensitive",
			"color", "nocolor", "column", "count", "filename", "nofilename", "files-with-matches",
			"files-without-matches", "fixed-strings", "follow", "group", "nogroup", "heading", "noheading",
			"hidden", "ignore-case", "invert-match", "literal", "nopager", "numbers", "nonumbers",
			"only-matching", "print-long-lines", "recurse", "norecurse", "search-binary", "search-zip",
			"silent", "smart-case", "stats", "unrestricted", "vimgrep", "word-regexp", "null", "print0",
		},
		abbrev: true,
	},
	"man": {
		short:    "CMPSsmeLEpRr",
		optShort: "HTX",
		long: []string{
			"config-file", "manpath", "pager", "sections", "systems", "extension", "locale", "encoding",
			"preprocessor", "recode", "prompt",
		},
		flags: []string{
			"html", "troff-device", "gxditview", "warnings", "all", "apropos", "whatis", "local-file",
			"where", "path", "location", "catman", "debug", "default", "regex", "wildcard", "names-only",
			"global-apropos", "ignore-case", "match-case", "update", "no-subpages", "ascii", "ditroff",
			"troff", "no-hyphenation", "no-justification", "help", "usage", "version",
		},
		abbrev: true,
	},
	"fd": {
		short: "dtoeESjc",
		long: []string{
			"max-depth", "min-depth", "exact-depth", "type", "extension", "exclude", "size",
			"changed-within", "changed-before", "change-newer-than", "change-older-than", "owner",
			"threads", "max-results", "color", "base-directory", "path-separator", "search-path",
			"format", "ignore-file", "batch-size", "max-buffer-time", "and",
		},
	},
	"fzf": {
		short: "qfdn",
		long: []string{
			"query", "filter", "delimiter", "nth", "with-nth", "accept-nth", "prompt", "pointer", "marker",
			"header", "header-lines", "height", "min-height", "layout", "border-label", "border-label-pos",
			"margin", "padding", "color", "preview", "preview-window", "preview-label", "preview-label-pos",
			"bind", "expect", "tiebreak", "history", "history-size", "scheme", "jump-labels", "tabstop",
			"ellipsis", "algo", "walker", "walker-root", "walker-skip", "with-shell", "info-command",
			"footer", "input-label", "list-label", "header-label", "ghost", "freeze-left", "freeze-right",
			"wrap-sign", "gutter", "style",
		},
	},
	"go": {
		single: true,
		long: []string{
			"exec", "toolexec", "run", "skip", "bench", "benchtime", "count", "timeout", "o", "tags",
			"ldflags", "gcflags", "asmflags", "gccgoflags", "p", "C", "coverprofile", "coverpkg",
			"covermode", "cpu", "parallel", "mod", "modfile", "overlay", "pkgdir", "buildmode",
			"compiler", "installsuffix", "pgo", "memprofile", "memprofilerate", "cpuprofile",
			"blockprofile", "blockprofilerate", "mutexprofile", "mutexprofilefraction", "outputdir",
			"trace", "shuffle", "fuzz", "fuzztime", "fuzzminimizetime", "list", "vet", "failfast",
		},
		flags: []string{
			"v", "x", "n", "a", "race", "msan", "asan", "cover", "short", "json", "work", "trimpath",
			"benchmem", "linkshared", "buildvcs", "fullpath",
		},
	},
	"npx":  {short: "cp", long: []string{"call", "package", "prefix", "cache", "userconfig", "registry"}},
	"npm":  {short: "cpwC", long: []string{"call", "package", "prefix", "workspace", "cache", "userconfig", "registry"}},
	"pnpm": {short: "cC", long: []string{"call", "dir", "filter", "reporter", "workspace"}},
	"gdb": {
		single: true,
		abbrev: true,
		long: []string{
			"ex", "iex", "eval-command", "init-eval-command", "x", "ix", "command", "init-command", "p", "pid",
			"c", "core", "s", "symbols", "e", "exec", "se", "d", "directory", "cd", "tty", "b", "l",
			"data-directory", "D",
		},
		flags: []string{
			"batch", "batch-silent", "q", "quiet", "silent", "nx", "n", "nh", "args", "tui", "readnow",
			"readnever", "write", "version", "help", "statistics", "return-child-result", "configuration",
		},
	},
	"entr": {short: "s"},
	// base64 of macOS and BSD (GNU base64 has no output option): -o names
	// the file the output goes to.
	"base64": {
		short: "wbio",
		long:  []string{"wrap", "break", "input", "output"},
		flags: []string{"decode", "ignore-garbage", "help", "version"},
	},
	"sed": {
		short: "efl", optShort: "i",
		long: []string{"expression", "file", "line-length"},
		flags: []string{
			"in-place", "quiet", "silent", "debug", "posix", "sandbox", "follow-symlinks", "null-data",
			"separate", "unbuffered", "regexp-extended", "zero-terminated", "help", "version",
		},
		abbrev: true,
	},
}

// runOpts are, per program, the options (canonical names) whose value runs
// a program or shell text.
var runOpts = map[string]map[string]runOpt{
	"rg": {
		"--pre": {}, "--hostname-bin": {},
		"-z": {bare: true}, "--search-zip": {bare: true},
	},
	"base64": {"-o": {writes: true}, "--output": {writes: true}},
	"sort":   {"--compress-program": {}},
	"ag":     {"--pager": {}},
	"man":    {"-P": {}, "--pager": {}, "-H": {}, "--html": {}},
	"fd":     {"-x": {rest: true}, "--exec": {rest: true}, "-X": {rest: true}, "--exec-batch": {rest: true}},
	"fzf":    {"--preview": {shell: true}, "--bind": {shell: true}, "--with-shell": {}, "--info-command": {shell: true}},
	"go":     {"--exec": {}, "--toolexec": {}}, // a program and its arguments, run on the built binary
	"npx":    {"-c": {shell: true}, "--call": {shell: true}},
	"npm":    {"-c": {shell: true}, "--call": {shell: true}},
	"pnpm":   {"-c": {shell: true}, "--call": {shell: true}},
	"entr":   {"-s": {shell: true}},
	"gdb": {
		"--ex": {lang: "gdb"}, "--eval-command": {lang: "gdb"}, "--iex": {lang: "gdb"},
		"--init-eval-command": {lang: "gdb"},
	},
}

// grammarFor returns the option grammar of a program, or nil.
func grammarFor(name string) *optSpec {
	if sp := grammars[name]; sp != nil {
		return sp
	}
	return optSpecs[name]
}

// ReadWords returns, for each simple command of a command line whose
// words are known, how its program reads each word. It is what
// "policy check --explain" prints.
func (c *Classifier) ReadWords(command string) ([][]WordReading, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return nil, err
	}
	a := newAnalyzer(c)
	var out [][]WordReading
	syntax.Walk(f, func(n syntax.Node) bool {
		ce, ok := n.(*syntax.CallExpr)
		if !ok || len(ce.Args) == 0 {
			return true
		}
		out = append(out, readCall(a.fieldsOf(ce.Args)))
		return true
	})
	return out, nil
}

// readCall reads one resolved argv: the program name, then its arguments
// by the program's grammar (by subcommand for git).
func readCall(argv []field) []WordReading {
	if len(argv) == 0 {
		return nil
	}
	rd := []WordReading{{Word: argv[0].s, Kind: WordCommand}}
	name := normName(argv[0].s)
	args := argv[1:]
	if name == "git" {
		_, grd := optSpecs["git"].read(args)
		for sub, r := range grd {
			if r.Kind != WordOperand {
				continue
			}
			// The first operand is the subcommand; its own grammar reads the rest.
			rd = append(rd, grd[:sub]...)
			rd = append(rd, WordReading{Word: args[sub].s, Kind: WordCommand})
			sp := optSpecs["git "+args[sub].s]
			if sp == nil {
				sp = &optSpec{}
			}
			_, srd := sp.read(args[sub+1:])
			return append(rd, srd...)
		}
		return append(rd, grd...)
	}
	sp := grammarFor(name)
	if sp == nil {
		for _, f := range args {
			rd = append(rd, WordReading{Word: f.s, Kind: WordUnparsed})
		}
		return rd
	}
	_, ard := sp.read(args)
	return append(rd, ard...)
}
