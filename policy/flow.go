package policy

import (
	"path"
	"regexp"
	"strings"
)

// Data flow through files within one command line. A file written, copied or linked earlier
// in the line is judged by what it will contain when a later part of the line runs it, not by
// what the session's disk holds now:
//
//   - a copy (cp, mv, install, cat >, tee, dd of=, a link) carries its source's content: what
//     the line wrote to the source, or else the source as it is on disk, read when the copy is
//     run (desc.src);
//   - a file written with content nobody can see here (a compiler's output, a copy made by
//     interpreter code, sed's w command, scp) is desc.unseen, and running it needs approval;
//   - after a command that writes files whose names are not known (tar x, unzip, git clone,
//     rsync), any file the line runs from disk might be one of them, so running one needs
//     approval too.

// maxFlowHops bounds how far a chain of copies is followed.
const maxFlowHops = 8

// runContent returns what the file t holds when the command line runs it as kind ("sh",
// "exec", "data" or a language): the line's own writes first, then the session's disk. It
// records the findings the flow itself calls for and asks the session to read the file (or
// the source of a copy) when its content is not known yet. ok is false when the content is
// not known.
func (a *analyzer) runContent(t target, kind string) (desc, bool) {
	d, ok := a.files[t.p]
	if !ok {
		a.want(t, kind)
		if a.blind && !t.dyn {
			a.add(ruleRunUnseen)
		}
		return desc{}, false
	}
	if a.blind && !a.line[t.p] {
		// On disk before, but maybe replaced by a writer whose names are unknown.
		a.add(ruleRunUnseen)
	}
	taint := d.t
	for hops := 0; !d.known && d.src != "" && hops < maxFlowHops; hops++ {
		src := target{p: d.src}
		a.want(src, kind)
		if a.blind {
			a.add(ruleRunUnseen) // the source may be one of the files written blind
		}
		next, ok := a.diskContent(d.src)
		if !ok {
			return desc{t: taint}, false
		}
		d = next
		taint |= d.t
	}
	if d.unseen {
		a.add(ruleRunUnseen)
		return desc{t: taint}, false
	}
	d.t = taint
	return d, d.known
}

// diskContent returns the session's file p as it was before the command line.
func (a *analyzer) diskContent(p string) (desc, bool) {
	if a.sess == nil || a.sess.disk == nil {
		return desc{}, false
	}
	d, ok := a.sess.disk[p]
	return d, ok
}

// linkContent is what a link at dst to src shows: src's content, src resolved against dst's
// directory as the kernel does for a relative symbolic link (ln -s).
func (a *analyzer) linkContent(src, dst field) desc {
	if strings.HasPrefix(src.s, "/") {
		return a.fileContent(src)
	}
	if !strings.Contains(dst.s, "/") {
		return a.fileContent(src)
	}
	return a.fileContent(field{s: path.Join(path.Dir(dst.s), src.s)})
}

// flowCall follows the data flow of one simple command: the files it writes from a known
// source that its handler does not track (dd if= of=), and whether it writes files whose
// names the analysis cannot know.
func (a *analyzer) flowCall(c *call) {
	switch c.name {
	case "dd":
		var in, out field
		for _, f := range c.args {
			switch {
			case strings.HasPrefix(f.s, "if="):
				in = f
				in.s = f.s[3:]
			case strings.HasPrefix(f.s, "of="):
				out = f
				out.s = f.s[3:]
			}
		}
		if out.s == "" || out.dyn || strings.HasPrefix(out.s, "/dev/") {
			return
		}
		content := c.in
		if in.s != "" {
			content = a.fileContent(in)
		}
		a.rememberFile(a.target(out).p, content)
		return
	}
	if blindWriter(c.name, c.args) {
		a.blind = true
	}
}

// sedWrite matches a sed w/W command or the w flag of s///: sed writes the named file.
var sedWrite = regexp.MustCompile(`(^|[;\n{}]|[0-9$/!])\s*[wW]\s+\S|[/|#,:][gpiIeEmM0-9]*w\s+\S`)

// blindWriter reports whether a command writes files whose names or content the analysis
// does not follow: archive extraction, version-control checkouts, copies from elsewhere,
// sed's w command and interpreter code that copies or writes files.
func blindWriter(name string, args []field) bool {
	first := ""
	for _, f := range args {
		if !strings.HasPrefix(f.s, "-") {
			first = f.s
			break
		}
	}
	hasOpt := func(short byte, long ...string) bool {
		for _, f := range args {
			s := f.s
			if s == "--" {
				return false
			}
			for _, l := range long {
				if s == l || strings.HasPrefix(s, l+"=") {
					return true
				}
			}
			if len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.IndexByte(s[1:], short) >= 0 {
				return true
			}
		}
		return false
	}
	switch name {
	case "tar", "bsdtar", "gtar":
		if len(args) > 0 && !strings.HasPrefix(args[0].s, "-") && strings.ContainsRune(args[0].s, 'x') {
			return true
		}
		return hasOpt('x', "--extract", "--get")
	case "unzip", "cpio", "7z", "7za", "7zr", "unrar", "ar", "rpm2cpio", "bsdcpio":
		switch name {
		case "unzip":
			return !hasOpt('l', "--list") && !hasOpt('t') && !hasOpt('p') && !hasOpt('Z')
		case "cpio", "bsdcpio":
			return hasOpt('i', "--extract")
		case "7z", "7za", "7zr", "unrar":
			return first == "x" || first == "e"
		case "ar":
			return strings.ContainsRune(first, 'x')
		}
	case "git":
		switch first {
		case "clone", "pull", "checkout", "switch", "reset", "restore", "apply", "am", "merge", "rebase",
			"stash", "cherry-pick", "revert", "worktree", "submodule":
			return true
		}
	case "patch", "rsync", "scp", "sftp", "svn", "hg", "rclone", "gsutil", "s3cmd", "wget":
		return true
	case "aws":
		return len(args) > 1 && args[0].s == "s3" && (args[1].s == "cp" || args[1].s == "sync" || args[1].s == "mv")
	case "sed", "gsed":
		for _, f := range args {
			if !strings.HasPrefix(f.s, "-") || strings.HasPrefix(f.s, "--expression=") {
				if sedWrite.MatchString(strings.TrimPrefix(f.s, "--expression=")) {
					return true
				}
			}
		}
	}
	if _, ok := interpreterLangs[name]; ok && name != "awk" {
		code := interpCode(name, args)
		return codeWrites(code) || containsAny(code, moreWrites)
	}
	return false
}

// moreWrites are the ways code writes files that codeWrites (code.go) does not list.
var moreWrites = []string{"symlink", "link(", "move(", "urlretrieve", "extract", "FileUtils", "copy_stream", "cpSync"}
