package policy

import (
	"path"
	"strings"
)

// delOpts describe a delete.
type delOpts struct {
	recursive, force bool
	outside          ruleID // rule for a delete outside the working tree
}

// deleteTarget judges deleting f.
func (a *analyzer) deleteTarget(f field, o delOpts) {
	if f.s == "" {
		return
	}
	if a.bulk > 0 {
		o.force = true
	}
	if a.findAll > 0 {
		o.recursive = true
	}
	if o.outside == 0 {
		o.outside = ruleDeleteOutside
	}
	if f.dyn {
		if a.protectedPrefix(f.s) {
			a.add(ruleGateConfigWrite)
		}
		if !o.recursive && !o.force {
			return
		}
		if o.recursive && dynHomeDir(f.s) {
			a.add(ruleDeleteHome)
			return
		}
		prefix := f.s[:strings.IndexByte(f.s, unk)]
		if prefix == "" || prefix == "/" || !a.insidePrefix(prefix) {
			if !(f.posRef && a.inFuncDef()) {
				a.add(ruleDeleteUnresolved)
			}
		}
		return
	}
	t := a.target(f)
	p := t.p
	if o.recursive && (f.s == "~" || strings.HasPrefix(f.s, "~/")) {
		// A quoted "~" is a directory named ~ here, but a second shell
		// (sh -c, ssh, eval) reads it as home, and that is what it means.
		t = a.target(field{s: a.c.home + f.s[1:], glob: true})
		p = t.p
	}
	if o.recursive {
		root, sys, home := false, false, false
		// A quoted pattern ("/*") names no file the shell expands, but it
		// shows the same intent, and an rm that gets it through a second
		// shell (sh -c, eval, ssh, xargs) expands it: judge it as a glob.
		if t.glob || strings.ContainsAny(p, "*?[") {
			root, sys, home = a.globHits(p)
		}
		switch {
		case p == "/" || root:
			a.add(ruleDeleteRoot)
			return
		case systemTops[p] || sys:
			a.add(ruleDeleteSystem)
			return
		case (a.isHomeDir(p) || home) && !a.inside(t):
			a.add(ruleDeleteHome)
			return
		}
	}
	if a.holdsProtected(t) {
		a.add(ruleGateConfigWrite)
		return
	}
	switch {
	case p == "/" || systemTops[p]:
		a.add(ruleDeleteSystemFile)
		return
	case a.isHistory(p):
		a.add(ruleHistory)
	case isLogPath(p):
		a.add(ruleLogs)
	case a.isCredential(t) || a.isRC(p) || a.isSSHDir(p):
		a.add(ruleDeleteSensitive)
	}
	if t.glob && !o.recursive {
		if root, sys, home := a.globHits(p); root || sys || home {
			a.add(o.outside)
			return
		}
	}
	if !a.inside(t) {
		if (o.recursive || o.force) && !a.regenerable(t) {
			a.add(o.outside)
		} else if a.isSystemWrite(p) {
			a.add(ruleDeleteSystemFile)
		}
	}
}

// dynHomeDir reports whether s, which holds an unresolved part, names a
// whole home directory such as /home/$USER or /Users/${name}/.
func dynHomeDir(s string) bool {
	for _, d := range [...]string{"/home/", "/Users/"} {
		if rest, ok := strings.CutPrefix(s, d); ok {
			rest = strings.TrimSuffix(strings.TrimSuffix(rest, "*"), "/")
			return strings.IndexByte(rest, unk) >= 0 && !strings.Contains(rest, "/")
		}
	}
	return false
}

func (a *analyzer) rm(c *call) {
	var o delOpts
	var targets []field
	ended := false
	for _, f := range c.args {
		s := f.s
		if !ended && !f.dyn && len(s) > 1 && s[0] == '-' {
			switch {
			case s == "--":
				ended = true
			case s == "--recursive":
				o.recursive = true
			case s == "--force":
				o.force = true
			case s == "--no-preserve-root":
				a.add(ruleNoPreserveRoot)
			case !strings.HasPrefix(s, "--"):
				o.recursive = o.recursive || strings.ContainsAny(s, "rR")
				o.force = o.force || strings.ContainsRune(s, 'f')
			}
			continue
		}
		targets = append(targets, f)
	}
	if c.name == "rmdir" {
		o = delOpts{}
	}
	for _, f := range targets {
		a.deleteTarget(f, o)
		if o.force {
			a.forcedTempDelete(f)
		}
	}
}

// forcedTempDelete flags rm -f of a named path in a shared temporary
// directory (/tmp/example). The working tree's own files are routine to
// delete, but /tmp is shared with every other program and user of the
// machine: a forced delete there, by absolute path, removes what the
// command line did not make, silently. A path the line itself made
// (mkdir -p /tmp/x && rm -rf /tmp/x, or a file it wrote), a name computed
// at run time (mktemp's, $$) and one under $TMPDIR (a directory of the
// session's own when it is set) stay routine.
func (a *analyzer) forcedTempDelete(f field) {
	if f.dyn || f.t&tTempVar != 0 || !strings.HasPrefix(f.s, "/") {
		return
	}
	t := a.target(f)
	if !isTemp(t.p) || a.c.workDir != "" && within(t.p, a.c.workDir) {
		return
	}
	for p := t.p; p != "/" && p != "."; p = path.Dir(p) {
		if a.made[p] || a.line[p] {
			return
		}
	}
	a.add(ruleForcedTempDelete)
}

func (a *analyzer) shred(c *call) {
	for _, f := range nonOptions(c.args, "nsx") {
		if strings.HasPrefix(f.s, "/dev/") {
			switch deviceKind(f.s) {
			case devBlock:
				if !f.dyn {
					a.add(ruleDiskWipe)
				} else {
					a.add(ruleDiskUnresolved)
				}
				continue
			case devOther:
				a.add(ruleDeviceWrite)
				continue
			}
		}
		a.deleteTarget(f, delOpts{force: true})
	}
}

var findFilters = map[string]bool{
	"-name": true, "-iname": true, "-path": true, "-ipath": true, "-regex": true, "-iregex": true, "-wholename": true,
	"-iwholename": true, "-newer": true, "-mtime": true, "-mmin": true, "-atime": true, "-amin": true, "-ctime": true,
	"-cmin": true, "-size": true, "-user": true, "-uid": true, "-group": true, "-gid": true, "-perm": true,
	"-empty": true, "-inum": true, "-samefile": true, "-links": true, "-lname": true, "-ilname": true, "-nouser": true,
	"-nogroup": true, "-newermt": true, "-used": true,
}

// findParse splits find's arguments into roots, whether the expression
// narrows the match, and whether it acts (-delete, -exec, ...).
func findParse(args []field) (roots []field, filtered, acts bool) {
	i := 0
	for i < len(args) {
		s := args[i].s
		if s == "-H" || s == "-L" || s == "-P" || strings.HasPrefix(s, "-O") {
			i++
			continue
		}
		if s == "-D" {
			i += 2
			continue
		}
		break
	}
	for ; i < len(args); i++ {
		s := args[i].s
		if strings.HasPrefix(s, "-") || s == "(" || s == "!" || s == "\\(" {
			break
		}
		roots = append(roots, args[i])
	}
	for ; i < len(args); i++ {
		s := args[i].s
		if findFilters[s] && !acts {
			filtered = true // a test that comes after the first action does not limit it
		}
		switch s {
		case "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls", "-fprint0":
			acts = true
		}
	}
	if len(roots) == 0 {
		roots = []field{lit(".")}
	}
	return
}

// secretNames are file names a credential hunt looks for; a find pattern
// that matches one of them (id_*, *.pem) is after secrets.
var secretNames = [...]string{"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "x.pem", "x.key", "x.p12", "x.pfx", "x.ppk",
	"x.kdbx", ".netrc", ".git-credentials", ".pgpass", "credentials", "shadow", "wallet.dat", ".env"}

// findHuntsSecrets reports whether find runs a command on files whose name
// pattern picks out credentials, searching outside the working tree.
func (a *analyzer) findHuntsSecrets(roots, args []field) bool {
	outside := false
	for _, r := range roots {
		if !r.dyn && !a.inside(a.target(r)) {
			outside = true
		}
	}
	if !outside {
		return false
	}
	execs, secret := false, false
	for i, f := range args {
		switch f.s {
		case "-exec", "-execdir", "-ok", "-okdir":
			execs = true
		case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename":
			if i+1 >= len(args) || args[i+1].dyn {
				continue
			}
			pat := path.Base(args[i+1].s)
			if f.s == "-iname" || f.s == "-ipath" || f.s == "-iwholename" {
				pat = strings.ToLower(pat)
			}
			for _, n := range secretNames {
				if pat == n || strings.ContainsAny(pat, "*?[") && matchGlob(pat, n) && !broadGlob(pat) {
					secret = true
				}
			}
			if !strings.ContainsAny(pat, "*?[") && a.isSecretSource(target{p: "/" + pat}) {
				secret = true
			}
		}
	}
	return execs && secret
}

// findReaders are programs that only read the files find hands them; any
// other program run by -exec or -execdir (rm, an interpreter, a shell, a
// script) may change every file the expression matches, so it needs
// approval, as -ok and -okdir do (they prompt on a terminal the agent
// answers).
var findReaders = map[string]bool{
	"cat": true, "head": true, "tail": true, "grep": true, "egrep": true, "fgrep": true, "rg": true, "wc": true,
	"ls": true, "stat": true, "file": true, "md5sum": true, "sha1sum": true, "sha256sum": true, "sha512sum": true,
	"b2sum": true, "cksum": true, "du": true, "echo": true, "printf": true, "basename": true, "dirname": true,
	"realpath": true, "readlink": true, "diff": true, "cmp": true, "strings": true, "od": true, "hexdump": true,
	"xxd": true, "nl": true, "test": true, "[": true, "true": true, "false": true, "jq": true, "lsattr": true,
	"getfacl": true, "tac": true, "ag": true, "ack": true, "zgrep": true,
}

// findReads reports whether the command find -exec runs only reads the
// files it is given.
func (a *analyzer) findReads(cmd []field) bool {
	if cmd[0].dyn {
		return false
	}
	switch name := normName(cmd[0].s); name {
	case "gofmt", "goimports":
		// Without -w they print; -l and -d list and diff.
		for _, f := range cmd[1:] {
			if f.dyn || f.s == "-w" {
				return false
			}
		}
		return true
	default:
		return findReaders[name]
	}
}

func (a *analyzer) find(c *call) {
	roots, filtered, _ := findParse(c.args)
	if a.findHuntsSecrets(roots, c.args) {
		a.add(ruleReadCreds)
	}
	// An action applies to the files the tests before it select: in
	// "find . -delete -name '*.o'" the -delete comes first and removes all.
	seenTest := false
	subst := func(r field) field {
		if filtered && seenTest {
			r.s = strings.TrimSuffix(r.s, "/") + "/{}"
			if r.s == "/{}" && !filtered {
				r.s = "/"
			}
		}
		return r
	}
	args := c.args
	for i := 0; i < len(args); i++ {
		if findFilters[args[i].s] {
			seenTest = true
		}
		switch s := args[i].s; s {
		case "-delete":
			for _, r := range roots {
				if filtered && seenTest {
					a.deleteTarget(subst(r), delOpts{recursive: true, outside: ruleFindDelete})
					continue
				}
				a.deleteTarget(r, delOpts{recursive: true, outside: ruleFindDelete})
			}
		case "-fprint", "-fprintf", "-fls", "-fprint0":
			if i+1 < len(args) {
				a.writeTarget(args[i+1], wCopy, desc{})
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" && args[j].s != "\\;" {
				j++
			}
			cmd := args[i+1 : j]
			i = j
			if len(cmd) == 0 {
				continue
			}
			if s == "-ok" || s == "-okdir" || !a.findReads(cmd) {
				a.add(ruleFindExec)
			}
			for _, r := range roots {
				r = subst(r)
				argv := make([]field, len(cmd))
				for k, f := range cmd {
					if strings.Contains(f.s, "{}") {
						f.s = strings.ReplaceAll(f.s, "{}", r.s)
						f.dyn = f.dyn || r.dyn
					}
					argv[k] = f
				}
				a.bulk++
				all := !filtered || !seenTest
				if all {
					a.findAll++
				}
				a.exec(argv, desc{})
				a.bulk--
				if all {
					a.findAll--
				}
			}
		}
	}
}

func (a *analyzer) rsync(c *call) {
	del := false
	var files []field
	for i := 0; i < len(c.args); i++ {
		s := c.args[i].s
		switch {
		case strings.HasPrefix(s, "--del") || s == "--remove-source-files":
			del = true
		case s == "-e" || s == "--rsh" || s == "--rsync-path":
			if i+1 < len(c.args) {
				a.programOption(c.args[i+1])
				i++
			}
		case strings.HasPrefix(s, "--rsh=") || strings.HasPrefix(s, "--rsync-path="):
			a.programOption(field{s: s[strings.IndexByte(s, '=')+1:], dyn: c.args[i].dyn})
		case s == "-f" || s == "--filter" || s == "--exclude" || s == "--include" || s == "--port" || s == "--chmod" || s == "-T" || s == "--temp-dir":
			i++
		case strings.HasPrefix(s, "-"):
		default:
			files = append(files, c.args[i])
		}
	}
	if len(files) < 2 {
		return
	}
	dst := files[len(files)-1]
	a.exfilCopy(files[:len(files)-1], dst)
	if isRemoteSpec(dst.s) {
		if strings.HasPrefix(dst.s, "rsync://") || strings.Contains(dst.s, "::") {
			// An rsync daemon's module: no ssh account, often no password,
			// and anyone who can reach it reads what is sent.
			a.add(ruleExposure)
		}
		if del {
			// The remote tree is outside the working tree by definition.
			a.add(ruleRsyncDelete)
		}
		return
	}
	a.writeTarget(dst, wCopy, desc{})
	if del {
		a.deleteTarget(dst, delOpts{recursive: true, outside: ruleRsyncDelete})
	}
}

// isRemoteSpec reports whether s names a remote file (host:path, s3://).
func isRemoteSpec(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	i := strings.IndexByte(s, ':')
	return i > 0 && !strings.ContainsRune(s[:i], '/')
}

func (a *analyzer) mv(c *call) {
	files, dst := copyArgs(c.args, "S")
	if dst.s == "" {
		return
	}
	for _, src := range files {
		if src.dyn {
			continue
		}
		t := a.target(src)
		switch {
		case a.holdsProtected(t):
			a.add(ruleGateConfigWrite)
		case t.p == "/" || systemTops[t.p] || a.isHomeDir(t.p) && !a.inside(t):
			a.add(ruleMoveSystem)
		case a.isHistory(t.p):
			a.add(ruleHistory)
		case isLogPath(t.p):
			a.add(ruleLogs)
		case a.isCredential(t) || a.isRC(t.p):
			a.add(ruleDeleteSensitive)
		case a.isSystemWrite(t.p):
			a.add(ruleWriteSystem)
		}
		if dst.s == "/dev/null" {
			a.deleteTarget(src, delOpts{recursive: true, force: true})
		}
	}
	if dst.s != "/dev/null" {
		content := desc{}
		if len(files) == 1 && !files[0].dyn {
			content = a.fileContent(files[0])
		}
		a.writeTarget(dst, wCopy, content)
	}
}
