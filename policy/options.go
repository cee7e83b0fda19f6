package policy

import "strings"

// optSpec describes a program's options, so that the positional arguments
// are found whatever options precede them, and so that abbreviated long
// options ("git reset --har", "rm --rec") are recognised the way the
// program itself recognises them (GNU getopt_long and git accept any
// unique prefix of a long option).
type optSpec struct {
	short  string   // short options that take a value ("-L data", "-Ldata")
	long   []string // long options (without "--") that take a value
	flags  []string // long options that take no value
	abbrev bool     // unique prefixes of long options are accepted
	// optShort are short options whose value is optional and so only
	// attached ("-Hfirefox"); a separate word after them is not theirs.
	optShort string
	// single: long options are written with one dash ("-exec", "-ex"),
	// as in Go's flag package and getopt_long_only; listed in long/flags.
	single bool
}

// opt is one parsed option: its canonical name ("-f", "--force") and value.
type opt struct {
	name string
	val  field
	has  bool // val was given
	at   int  // index of the option's word in the arguments
}

// parsedArgs are arguments split by an optSpec.
type parsedArgs struct {
	opts []opt
	pos  []field
}

// expandLong returns the full name of the long option n (without "--"),
// resolving a unique abbreviation when the spec allows it.
func (sp *optSpec) expandLong(n string) (string, bool) {
	if contains(sp.long, n) {
		return n, true
	}
	if contains(sp.flags, n) || !sp.abbrev || n == "" {
		return n, false
	}
	match, valued := "", false
	for _, l := range sp.long {
		if strings.HasPrefix(l, n) {
			if match != "" {
				return n, false // ambiguous: the program rejects it
			}
			match, valued = l, true
		}
	}
	for _, l := range sp.flags {
		if strings.HasPrefix(l, n) && l != match {
			if match != "" {
				return n, false
			}
			match = l
		}
	}
	if match == "" {
		return n, false
	}
	return match, valued
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// parse splits args into options and positionals. "--" ends the options;
// a lone "-" is a positional.
func (sp *optSpec) parse(args []field) parsedArgs {
	p, _ := sp.read(args)
	return p
}

// has reports whether any of the named options ("-f", "--force") was given.
func (p parsedArgs) has(names ...string) bool {
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n {
				return true
			}
		}
	}
	return false
}

// value returns the last value given to any of the named options.
func (p parsedArgs) value(names ...string) (field, bool) {
	var v field
	found := false
	for _, o := range p.opts {
		for _, n := range names {
			if o.name == n && o.has {
				v, found = o.val, true
			}
		}
	}
	return v, found
}

// canon rewrites abbreviated long options in args to their full names, so
// that rules written against full names see them. Only words read as
// options are rewritten: option values and operands are left as they are.
func (sp *optSpec) canon(args []field) []field {
	_, rd := sp.read(args)
	var out []field
	for i, r := range rd {
		if r.Kind != WordOption || !strings.HasPrefix(args[i].s, "--") {
			continue
		}
		name, val, eq := strings.Cut(args[i].s[2:], "=")
		full := strings.TrimPrefix(r.Option, "--")
		if full == name {
			continue
		}
		if out == nil {
			out = append([]field(nil), args...)
		}
		out[i].s = "--" + full
		if eq {
			out[i].s += "=" + val
		}
	}
	if out == nil {
		return args
	}
	return out
}

// optSpecs are the option specs of the programs whose rules look at their
// positional arguments or long options. Keys are normalised command names
// ("git push" for a git subcommand).
var optSpecs = map[string]*optSpec{
	"rm": {flags: []string{"force", "interactive", "one-file-system", "no-preserve-root", "preserve-root", "recursive", "dir", "verbose", "help", "version"}, abbrev: true},
	"git": {long: []string{"git-dir", "work-tree", "namespace", "config-env", "exec-path", "super-prefix", "list-cmds", "attr-source"},
		flags: []string{
			"paginate", "no-pager", "no-replace-objects", "bare", "literal-pathspecs", "glob-pathspecs",
			"noglob-pathspecs", "icase-pathspecs", "no-optional-locks", "version", "help", "html-path",
			"man-path", "info-path",
		},
		short: "Cc", abbrev: true},
	"git push": {long: []string{"repo", "receive-pack", "exec", "push-option", "signed", "recurse-submodules", "force-with-lease"},
		flags: []string{
			"all", "branches", "mirror", "tags", "follow-tags", "atomic", "no-atomic", "dry-run",
			"porcelain", "delete", "force", "force-if-includes", "no-force-if-includes", "set-upstream",
			"thin", "no-thin", "quiet", "verbose", "progress", "no-verify", "verify", "prune", "ipv4",
			"ipv6", "no-signed",
		},
		short: "o", abbrev: true},
	"git reset": {long: []string{"pathspec-from-file"}, flags: []string{
		"soft", "mixed", "hard", "merge", "keep", "quiet", "no-quiet", "refresh", "no-refresh",
		"recurse-submodules", "no-recurse-submodules", "intent-to-add", "pathspec-file-nul", "patch",
	}, abbrev: true},
	"git clean": {long: []string{"exclude"}, flags: []string{"dry-run", "force", "interactive", "quiet"}, short: "e", abbrev: true},
	"git checkout": {long: []string{"conflict", "orphan", "pathspec-from-file"}, flags: []string{
		"force", "quiet", "progress", "no-progress", "ours", "theirs", "track", "no-track", "guess",
		"no-guess", "detach", "merge", "overwrite-ignore", "no-overwrite-ignore",
		"ignore-other-worktrees", "recurse-submodules", "patch", "overlay", "no-overlay",
		"ignore-skip-worktree-bits",
	}, short: "bB", abbrev: true},
	"git restore": {long: []string{"source", "conflict", "pathspec-from-file"}, flags: []string{
		"staged", "worktree", "patch", "quiet", "progress", "ours", "theirs", "merge",
		"ignore-unmerged", "ignore-skip-worktree-bits", "recurse-submodules", "overlay", "no-overlay",
	}, short: "s", abbrev: true},
	"git branch": {long: []string{
		"set-upstream-to", "contains", "no-contains", "merged", "no-merged", "sort", "points-at",
		"format", "color",
	}, flags: []string{
		"delete", "force", "move", "copy", "list", "all", "remotes", "verbose", "quiet", "track",
		"no-track", "unset-upstream", "edit-description", "show-current", "create-reflog",
		"ignore-case", "column", "no-column",
	}, short: "u", abbrev: true},
	"git stash": {flags: []string{"quiet", "index", "keep-index", "include-untracked", "all", "patch", "staged"}, abbrev: true},
	"tar": {short: "fbCFgHIKLNTVX", long: []string{
		"file", "blocking-factor", "directory", "info-script", "new-volume-script",
		"listed-incremental", "format", "use-compress-program", "starting-file", "newer", "after-date",
		"tape-length", "files-from", "label", "exclude-from", "to-command", "checkpoint",
		"checkpoint-action", "owner", "group", "mode", "mtime", "transform", "xform", "exclude",
		"rsh-command", "index-file", "volno-file", "record-size", "strip-components", "suffix",
		"backup", "occurrence", "quoting-style", "sort", "warning",
	},
		flags: []string{
			"create", "extract", "get", "list", "append", "update", "delete", "catenate", "concatenate",
			"diff", "compare", "remove-files", "gzip", "gunzip", "bzip2", "xz", "zstd", "lzma", "lzip",
			"lzop", "compress", "uncompress", "auto-compress", "verbose", "keep-old-files", "overwrite",
			"unlink-first", "recursive-unlink", "dereference", "absolute-names", "preserve-permissions",
			"same-owner", "no-same-owner", "wildcards", "one-file-system", "totals", "to-stdout",
			"ignore-zeros",
		},
		abbrev: true},
	"truncate": {short: "sr", long: []string{"size", "reference"}, flags: []string{"no-create", "io-blocks", "help", "version"}, abbrev: true},
	"kill":     {short: "snlL", long: []string{"signal"}, flags: []string{"list", "table", "queue", "timeout", "verbose"}},
	"fallocate": {short: "lo", long: []string{"length", "offset"}, flags: []string{
		"keep-size", "punch-hole", "collapse-range", "zero-range", "insert-range", "dig-holes", "posix",
		"verbose",
	}, abbrev: true},
	"dig":      {short: "bcfkpqtxy", long: nil},
	"nslookup": {},
	"host":     {short: "cNRtWm"},
	"ping":     {short: "cDFiIlmMpQsStTwW"},
	"chmod":    {long: []string{"reference"}, flags: []string{"recursive", "changes", "silent", "quiet", "verbose", "preserve-root", "no-preserve-root"}, abbrev: true},
	"chown": {long: []string{"reference", "from"}, flags: []string{
		"recursive", "changes", "silent", "quiet", "verbose", "dereference", "no-dereference",
		"preserve-root", "no-preserve-root",
	}, abbrev: true},
	"ssh":    {short: "BbcDEeFIiJLlmOopQRSWw"},
	"python": {short: "cmWX"},
}

// mkfsSpec returns the option spec of a mkfs variant: the same letter takes
// a value in one (mkfs.vfat -F 32) and is a boolean in another (mke2fs -F).
func mkfsSpec(variant string) *optSpec {
	switch variant {
	case "mkfs.ext2", "mkfs.ext3", "mkfs.ext4", "mke2fs", "mkfs.ext4dev":
		return &optSpec{short: "bCcdEgGiIjJLlmNoOrtTUez"}
	case "mkfs.xfs":
		return &optSpec{short: "bmdilnprsL"}
	case "mkfs.vfat", "mkfs.fat", "mkfs.msdos", "mkdosfs":
		return &optSpec{short: "aAbfFhiLmnrRsS"}
	case "mkfs.btrfs":
		return &optSpec{short: "ALdmnsOrUR", long: []string{"label", "data", "metadata", "nodesize", "sectorsize", "features", "rootdir", "uuid", "byte-count", "checksum"}}
	case "mkswap":
		return &optSpec{short: "pLUeo"}
	case "mkfs":
		return &optSpec{short: "t", long: []string{"type"}}
	}
	return &optSpec{short: "tLbBcCEgGIjJlmNoOrTUv"}
}

// hasOpt reports whether args hold one of opts exactly, or start with one
// that ends in "=" (--output=).
func hasOpt(args []field, opts ...string) bool {
	for _, f := range args {
		for _, o := range opts {
			if f.s == o || strings.HasSuffix(o, "=") && strings.HasPrefix(f.s, o) {
				return true
			}
		}
	}
	return false
}
