package policy

import (
	"strings"
)

type writeKind int

const (
	wRedirect writeKind = iota
	wCopy
	wEdit
	wDownload
	wRaw // dd, cp or tee onto a device
)

// writeTarget judges a write to f; content is what gets written.
func (a *analyzer) writeTarget(f field, how writeKind, content desc) {
	a.noteWrite(f)
	if f.s == "" || f.proc != nil {
		return
	}
	if f.dyn {
		if a.protectedPrefix(f.s) {
			a.add(ruleGateConfigWrite)
		}
		if strings.HasPrefix(f.s, "/dev/") {
			a.add(ruleDiskUnresolved)
		}
		return
	}
	t := a.target(f)
	p := t.p
	if a.isProtected(t) {
		a.add(ruleGateConfigWrite)
		return
	}
	if strings.HasPrefix(p, "/dev/") {
		switch deviceKind(p) {
		case devBlock:
			if how == wRedirect {
				a.add(ruleRedirectDevice)
			} else {
				a.add(ruleDiskOverwrite)
			}
		case devOther:
			a.add(ruleDeviceWrite)
		}
		return
	}
	if isAgentSettings(p) {
		a.add(ruleAgentSettings)
	}
	switch {
	case p == "/proc/sysrq-trigger":
		a.add(ruleSysrq)
	case within(p, "/proc/sys") || within(p, "/sys/kernel") || within(p, "/sys/module"):
		a.add(ruleKernel)
	case a.isRC(p):
		a.add(ruleWriteRC)
		if hasGateEnv(content.text) {
			a.add(ruleGateEnv)
		}
	case isAuthorizedKeys(p):
		a.add(ruleAuthorizedKeys)
	case a.isSSHDir(p):
		a.add(ruleWriteSSH)
	case a.isCredential(t):
		a.add(ruleWriteCreds)
	case a.isHistory(p):
		a.add(ruleHistory)
	case isLogPath(p):
		a.add(ruleLogs)
	case isCronPath(p):
		a.add(ruleCron)
	case a.isServicePath(p):
		a.add(ruleService)
	case isLDPreload(p):
		a.add(ruleLDPreload)
	case isGitHook(p):
		a.add(ruleGitHooks)
	case isUserDB(p):
		a.add(ruleUsers)
	case a.isSystemWrite(p):
		a.add(ruleWriteSystem)
	}
	a.rememberFile(p, content)
}

func (a *analyzer) rememberFile(p string, d desc) {
	if !d.known && d.src == "" {
		// Written with content nobody can see here: running it later in the line asks.
		d = desc{t: d.t, unseen: true}
	}
	if a.files == nil {
		a.files = map[string]desc{}
	}
	if a.line == nil {
		a.line = map[string]bool{}
	}
	a.files[p] = d
	a.line[p] = true
}

func (a *analyzer) cp(c *call) {
	if c.name == "install" {
		for _, f := range c.args {
			if f.s == "-d" || f.s == "--directory" {
				return
			}
		}
	}
	files, dst := copyArgs(c.args, "STgmob")
	if dst.s == "" {
		return
	}
	a.shadowsProgram(files, dst)
	content := desc{}
	for _, src := range files {
		if src.dyn {
			continue
		}
		t := a.target(src)
		if a.isCredential(t) {
			a.add(ruleReadCreds)
		}
		if len(files) == 1 {
			content = a.fileContent(src)
		}
	}
	how := wCopy
	if strings.HasPrefix(dst.s, "/dev/") {
		how = wRaw
	}
	a.writeTarget(dst, how, content)
}

// copyArgs splits cp/mv/install arguments into sources and destination.
func copyArgs(args []field, valued string) ([]field, field) {
	var files []field
	var dir field
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "-t" || s == "--target-directory":
			if i+1 < len(args) {
				dir = args[i+1]
				i++
			}
		case strings.HasPrefix(s, "--target-directory="):
			dir = args[i]
			dir.s = s[len("--target-directory="):]
		case len(s) == 2 && s[0] == '-' && strings.IndexByte(valued, s[1]) >= 0:
			i++
		case strings.HasPrefix(s, "-") && len(s) > 1:
		default:
			files = append(files, args[i])
		}
	}
	if dir.s != "" {
		return files, dir
	}
	if len(files) < 2 {
		return nil, field{}
	}
	return files[:len(files)-1], files[len(files)-1]
}

func (a *analyzer) ln(c *call) {
	files, dst := copyArgs(c.args, "S")
	if dst.s == "" {
		return
	}
	a.shadowsProgram(files, dst)
	for _, src := range files {
		if isDevNet(src.s) || src.s == "/dev/null" && a.isHistory(a.target(dst).p) {
			a.add(ruleHistory)
		}
	}
	content := desc{}
	if len(files) == 1 && !files[0].dyn {
		content = a.linkContent(files[0], dst)
	}
	a.writeTarget(dst, wCopy, content)
}

func (a *analyzer) tee(c *call) {
	for _, f := range nonOptions(c.args, "") {
		how := wCopy
		if strings.HasPrefix(f.s, "/dev/") {
			how = wRaw
		}
		a.writeTarget(f, how, c.in)
	}
}

func (a *analyzer) touchLike(c *call) {
	switch c.name {
	case "truncate":
		for _, f := range nonOptions(c.args, "sr") {
			a.writeTarget(f, wEdit, desc{})
		}
	case "mkdir":
		for _, f := range nonOptions(c.args, "m") {
			if !f.dyn {
				if a.made == nil {
					a.made = map[string]bool{}
				}
				a.made[a.target(f).p] = true
			}
		}
		a.generic(c)
	default:
		a.generic(c)
	}
}

func (a *analyzer) sed(c *call) {
	scripts, files, inplace := a.sedScripts(c.args)
	a.sedProgramRules(scripts)
	if !inplace {
		a.generic(&call{name: "cat", args: files, in: c.in})
		return
	}
	for _, f := range files {
		a.writeTarget(f, wEdit, desc{})
	}
}

func (a *analyzer) inplaceEditor(c *call) {
	inplace := c.name != "yq"
	for _, f := range c.args {
		if f.s == "-i" || f.s == "--inplace" || strings.HasPrefix(f.s, "-i") && c.name == "yq" || f.s == "-w" || f.s == "--write" {
			inplace = true
		}
	}
	files := nonOptions(c.args, "")
	if !inplace || len(files) == 0 {
		return
	}
	if c.name == "crudini" || c.name == "dasel" {
		for _, f := range files {
			a.writeTarget(f, wEdit, desc{})
		}
		return
	}
	a.writeTarget(files[len(files)-1], wEdit, desc{})
}

func (a *analyzer) editor(c *call) {
	if c.name == "sudoedit" {
		a.add(rulePrivilege)
	}
	a.editorCommands(c.args)
	var files []field
	for i := 0; i < len(c.args); i++ {
		if s := c.args[i].s; s == "-c" || s == "--cmd" || s == "-S" || s == "-u" || s == "-i" {
			i++
			continue
		}
		files = append(files, c.args[i])
	}
	a.editFiles(files)
}

func (a *analyzer) editFiles(args []field) {
	for _, f := range args {
		if strings.HasPrefix(f.s, "-") || strings.HasPrefix(f.s, "+") {
			continue
		}
		a.writeTarget(f, wEdit, desc{})
	}
}

func (a *analyzer) dd(c *call) {
	var in, out field
	count := false
	for _, f := range c.args {
		k, v, ok := strings.Cut(f.s, "=")
		if !ok {
			continue
		}
		g := f
		g.s = v
		switch k {
		case "of":
			out = g
			a.writeTarget(g, wRaw, desc{})
		case "if":
			in = g
			if !g.dyn && a.isCredential(a.target(g)) {
				a.add(ruleReadCreds)
			}

		case "count":
			count = true
		}
	}
	if !in.dyn && strings.HasPrefix(in.s, "/dev/") && deviceKind(in.s) == devBlock && out.s != "" && !strings.HasPrefix(out.s, "/dev/") {
		// A raw copy of a disk into a file holds every file on the disk: keys, the shadow
		// file, other users' data, whatever the permissions on those files say.
		a.add(ruleReadCreds)
	}
	// A device computed at run time, an endless source with no count (fills
	// the disk), or zeros over a document outside the working tree.
	switch {
	case out.t&tDevice != 0:
		a.add(ruleDiskOverwrite)
	case out.s == "" || strings.HasPrefix(out.s, "/dev/") || !isEndless(in.s):
	case !count:
		a.add(ruleFillDisk)
	case a.outsideHome(a.target(field{s: a.expandHome(out.s), dyn: out.dyn})):
		a.add(ruleTruncate)
	}
}

func (a *analyzer) archive(c *call) {
	extract, create := false, false
	var dest field
	args := c.args
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "-C" || s == "--directory" || (c.name == "unzip" && s == "-d"):
			if i+1 < len(args) {
				dest = args[i+1]
				i++
			}
		case strings.HasPrefix(s, "--directory="):
			dest = args[i]
			dest.s = s[len("--directory="):]
		case strings.HasPrefix(s, "-o") && c.name == "7z":
			dest = args[i]
			dest.s = s[2:]
		case strings.HasPrefix(s, "--to-command="), strings.HasPrefix(s, "--checkpoint-action=exec="),
			strings.HasPrefix(s, "--use-compress-program="), strings.HasPrefix(s, "--info-script="), strings.HasPrefix(s, "--new-volume-script="):
			v := s[strings.IndexByte(s, '=')+1:]
			v = strings.TrimPrefix(v, "exec=")
			a.programOption(field{s: v, dyn: args[i].dyn, t: args[i].t})
		case s == "-I" || s == "--use-compress-program" || s == "--to-command":
			if i+1 < len(args) {
				a.programOption(args[i+1])
				i++
			}
		case s == "--extract" || s == "--get" || c.name == "unzip" || c.name == "7z" && s == "x":
			extract = true
		case s == "--create" || s == "--append":
			create = true
		case i == 0 && !strings.HasPrefix(s, "--") && c.name != "unzip":
			extract = extract || strings.ContainsRune(s, 'x')
			create = create || strings.ContainsRune(s, 'c') || strings.ContainsRune(s, 'r')
		case strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--"):
			extract = extract || strings.ContainsRune(s, 'x')
			create = create || strings.ContainsRune(s, 'c')
		}
	}
	if c.name == "unzip" {
		extract = true
	}
	if extract {
		if dest.s == "" {
			dest = lit(".")
		}
		a.writeTarget(dest, wCopy, desc{})
	}
	if create {
		for _, f := range args {
			if !f.dyn && !strings.HasPrefix(f.s, "-") && a.isCredential(a.target(f)) {
				a.add(ruleReadCreds)
			}
		}
	}
}

func (a *analyzer) mkfifo(c *call) {
	if c.name == "mkfifo" {
		a.sawMkfifo = true
		return
	}
	for _, f := range c.args {
		if f.s == "p" {
			a.sawMkfifo = true
		}
	}
}

// Readers may mention the sandbox's own files; anything else that does is
// taken to modify them.
var protectedReaders = map[string]bool{
	"cat": true, "less": true, "more": true, "head": true, "tail": true, "grep": true, "egrep": true, "fgrep": true,
	"rg": true, "ag": true, "ack": true, "ls": true, "stat": true, "file": true, "wc": true, "diff": true, "cmp": true,
	"md5sum": true, "sha1sum": true, "sha256sum": true, "sha512sum": true, "b2sum": true, "cksum": true, "bat": true,
	"jq": true, "test": true, "[": true, "[[": true, "realpath": true, "readlink": true, "dirname": true, "basename": true,
	"cd": true, "pushd": true, "du": true, "tree": true, "hexdump": true, "xxd": true, "od": true, "strings": true,
	"hermes-sandbox": true, "echo": true, "printf": true, "nl": true, "sort": true, "uniq": true, "cut": true, "awk": true,
	"column": true, "fold": true, "view": true, "source": true, ".": true, "yq": true, "find": true, "sed": true,
	"tar": true, "zip": true, "lsattr": true, "getfacl": true, "namei": true, "base64": true, "tac": true, "git": true,
}

// credReaders may name credential files without reading their content.
var credReaders = map[string]bool{
	"ls": true, "stat": true, "file": true, "du": true, "test": true, "[": true, "chmod": true, "chown": true, "chgrp": true,
	"touch": true, "mkdir": true, "ssh": true, "ssh-add": true, "ssh-keygen": true, "ssh-copy-id": true, "echo": true,
	"printf": true, "realpath": true, "readlink": true, "dirname": true, "basename": true, "cd": true, "pushd": true,
	"wc": true, "find": true, "git": true, "md5sum": true, "sha256sum": true, "sha1sum": true, "lsattr": true, "getfacl": true,
	"kubectl": true, "helm": true, "k9s": true, "docker": true, "gcloud": true, "az": true, "aws": true, "terraform": true,
	"vault": true, "export": true, "namei": true, "shred": true, "rm": true, "unlink": true, "setfacl": true, "chattr": true,
	"sftp": true, "mosh": true, "autossh": true, "gpg": true, "keychain": true, "ssh-agent": true, "test-ssh": true,
}

// identityOpts name a key file a tool authenticates with; the key is used,
// not read out.
var identityOpts = map[string]bool{
	"-i": true, "--identity": true, "--identity-file": true, "--private-key": true, "--key-file": true,
	"--ssh-key": true, "--ssh-key-file": true, "--keyfile": true, "--key": true, "--kubeconfig": true,
	"--cert": true, "--tls-key": true, "--credentials": true, "--credentials-file": true,
}

// generic applies the checks every command gets: the sandbox's own files,
// credentials and /dev/tcp in its arguments.
func (a *analyzer) generic(c *call) {
	prev := ""
	for _, f := range c.args {
		identity := identityOpts[prev]
		prev = f.s
		if identity {
			continue
		}
		if f.dyn || f.s == "" {
			if f.dyn && a.protectedPrefix(f.s) && !protectedReaders[c.name] {
				a.add(ruleGateConfigWrite)
			}
			continue
		}
		s := f.s
		if s[0] == '-' {
			i := strings.IndexByte(s, '=')
			if i < 0 || identityOpts[s[:i]] {
				continue
			}
			s = s[i+1:]
		} else if k, v, ok := strings.Cut(s, "="); ok && !strings.Contains(k, "/") {
			s = v
		}
		s = strings.TrimLeft(s, "@<")
		if s == "" {
			continue
		}
		if isDevNet(s) {
			a.sawNet = true
			a.add(ruleDevTCP)
			continue
		}
		t := a.target(field{s: s, glob: f.glob})
		if !protectedReaders[c.name] && a.isProtected(t) {
			a.add(ruleGateConfigWrite)
		}
		if !credReaders[c.name] && a.isCredential(t) {
			a.add(ruleReadCreds)
		}
	}
}

func (a *analyzer) cd(c *call) {
	args := nonOptions(c.args, "")
	if len(args) == 0 {
		a.cwd, a.cwdDyn = a.c.home, false
		return
	}
	f := args[0]
	if f.dyn || f.s == "-" {
		a.cwdDyn = true
		return
	}
	t := a.target(f)
	a.cwd, a.cwdDyn = t.p, false
	if t.p == "." {
		a.cwd = ""
	}
}

// pathDirs are directories commonly on PATH, where a file named like a
// program shadows the real one for every later command.
var pathDirs = [...]string{
	"~/.local/bin", "~/bin", "~/go/bin", "~/.cargo/bin", "~/.npm-global/bin", "/usr/local/bin", "/usr/local/sbin",
	"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/opt/homebrew/bin", "/opt/local/bin", "/snap/bin",
}

// commonPrograms are everyday programs (beyond those with rules of their
// own) that a shadowing file in a PATH directory would impersonate.
var commonPrograms = map[string]bool{
	"ls": true, "cd": true, "sudo": true, "su": true, "which": true, "env": true, "id": true, "ps": true,
	"make": true, "echo": true, "cp": true, "mv": true, "pwd": true, "whoami": true, "test": true,
	"python3": true, "pip": true, "pip3": true, "node": true, "bash": true, "sh": true, "zsh": true,
	"hermes-sandbox": true, "hermes": true, "clear": true, "man": true, "chmod": true, "touch": true,
}

// shadowsProgram flags a copy or link into a PATH directory under the
// name of a program: "ln -s /bin/sh ~/.local/bin/ls" makes every later ls a shell.
func (a *analyzer) shadowsProgram(files []field, dst field) {
	if dst.dyn {
		return
	}
	d := a.expandHome(strings.TrimRight(dst.s, "/"))
	name := ""
	for _, p := range pathDirs {
		p = a.expandHome(p)
		switch {
		case d == p && len(files) > 0:
			name = cmdBase(files[0].s) // into the directory, under the source's name
		case strings.HasPrefix(d, p+"/") && !strings.Contains(d[len(p)+1:], "/"):
			name = d[len(p)+1:]
		}
	}
	if name == "" {
		return
	}
	if commonPrograms[name] || helperPrograms[name] || handlers[name] != nil || wrapSpecFor(name) != nil {
		a.add(ruleRegistryRedirect)
	}
}
