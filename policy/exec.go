package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// call is one simple command after its words were resolved.
type call struct {
	name  string // normalised command name
	argv0 field
	args  []field
	in    desc // what it reads on stdin
}

type handler func(a *analyzer, c *call)

// exec classifies the command argv (already resolved) reading in, and
// returns what it prints.
func (a *analyzer) exec(argv []field, in desc) desc {
	if len(argv) == 0 || !a.step() {
		return desc{known: true}
	}
	f0 := argv[0]
	if f0.dyn {
		return a.dynamicCommand(f0, argv[1:], in)
	}
	raw := f0.s
	a.recordCall(raw)
	if body, ok := a.funcs[raw]; ok {
		if a.funcCalls < maxFuncCalls {
			a.funcCalls++
			a.walkFunc(raw, body, argv[1:], true)
		}
		return desc{t: in.t}
	}
	if v, ok := a.aliases[raw]; ok {
		delete(a.aliases, raw)
		expanded := append(a.textFields(v), argv[1:]...)
		out := a.exec(expanded, in)
		a.aliases[raw] = v
		return out
	}
	switch {
	case f0.t&tRemote != 0:
		a.add(rulePipeShell)
	case f0.t&tDecoded != 0:
		a.add(ruleObfuscated)
	}
	name := normName(raw)
	if lower := strings.ToLower(name); lower != name && dispatch(name) == nil && dispatch(lower) != nil {
		// macOS and Windows file systems ignore case by default: SUDO and Rm run sudo and rm.
		name = lower
	}
	if lookalikeName(raw) {
		a.add(ruleLookalike)
	}
	if f0.glob {
		g, ok := globCommand(cmdBase(raw))
		if !ok {
			a.add(ruleDynamicCommand)
			return desc{t: in.t}
		}
		name = g
	}
	if strings.ContainsRune(raw, '/') && !f0.dyn {
		if orig := a.copiedProgram(a.target(f0)); orig != "" {
			name = orig
		}
	}
	a.lastCmd, a.lastArgc = name, len(argv)-1
	a.noteRun(name)
	if strings.ContainsRune(raw, '/') && !f0.dyn {
		d, known := a.runContent(a.target(f0), "exec")
		if d.t&tRemote != 0 {
			a.add(ruleDownloadExec)
		}
		if known {
			if lang := shebangLang([]byte(d.text)); lang != "" && lang != "sh" {
				a.noteRun(lang) // tools.code_execution applies to the interpreter the #! line names
				a.analyzeCode(lang, d.text)
			} else {
				a.shellStdin(d)
			}
		}
	}
	c := &call{name: name, argv0: f0, args: argv[1:], in: in}
	if sp := optSpecs[name]; sp != nil && sp.abbrev {
		c.args = sp.canon(c.args)
	}
	a.cliMatch(name, c.args)
	a.extraRules(c)
	if h := dispatch(name); h != nil {
		h(a, c)
	} else {
		a.generic(c)
	}
	a.flowCall(c)
	for _, f := range c.args {
		if f.procOut != nil {
			pin := desc{}
			if name == "tee" {
				pin = in
			}
			a.procOut(f.procOut, pin)
		}
	}
	return a.produce(argv, in)
}

// copiedProgram returns the name of the program that t, a file the command line copied or
// linked from a program's path earlier (cp /usr/bin/python3 ./p, ln -s /bin/rm x), runs
// when it is executed, if the policy knows that program; "" otherwise. A renamed copy of an
// interpreter or of rm is judged as what it is, not by its new name.
func (a *analyzer) copiedProgram(t target) string {
	p := t.p
	for hops := 0; hops < maxFlowHops; hops++ {
		d, ok := a.files[p]
		if !ok || !a.line[p] || d.src == "" || d.known {
			break
		}
		p = d.src
	}
	if p == t.p {
		return ""
	}
	n := normName(p)
	if dispatch(n) != nil || IsInterpreter(n) || isShell(n) || n == "awk" {
		return n
	}
	return ""
}

func (a *analyzer) dynamicCommand(f0 field, args []field, in desc) desc {
	switch {
	case f0.t&tRemote != 0:
		a.add(rulePipeShell)
	case f0.t&tDecoded != 0:
		a.add(ruleObfuscated)
	}
	if f0.posRef && a.inFuncDef() {
		return desc{t: in.t}
	}
	a.add(ruleDynamicCommand)
	// The name is unknown, so judge the arguments as what they would do for the
	// programs they fit: "$SUDO rm -rf /" is a wrapper's command line and
	// "${RM} -rf /" is rm's. Either is as severe as the plain form.
	if len(args) > 0 && !args[0].dyn && !strings.HasPrefix(args[0].s, "-") {
		a.exec(args, in)
	}
	if rmLike(args) {
		a.rm(&call{name: "rm", args: args, in: in})
	}
	return desc{t: in.t}
}

// rmLike reports whether args read as rm's: a cluster of short options with
// both r (or R) and f, or --recursive with --force, before an operand.
func rmLike(args []field) bool {
	rec, force := false, false
	for _, f := range args {
		s := f.s
		switch {
		case f.dyn || s == "--":
			continue
		case s == "--recursive":
			rec = true
		case s == "--force":
			force = true
		case len(s) > 1 && s[0] == '-' && s[1] != '-':
			rec = rec || strings.ContainsAny(s[1:], "rR")
			force = force || strings.ContainsRune(s[1:], 'f')
		}
	}
	return rec && force
}

// textFields splits a shell snippet (an alias body) into fields.
func (a *analyzer) textFields(text string) []field {
	f := a.parse(text, false)
	if f == nil || len(f.Stmts) != 1 {
		return []field{{s: unkS, dyn: true}}
	}
	if ce, ok := f.Stmts[0].Cmd.(*syntax.CallExpr); ok {
		return a.fieldsOf(ce.Args)
	}
	return []field{{s: unkS, dyn: true}}
}

func cmdBase(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// normName maps a command word to the name its rules are keyed by.
func normName(s string) string {
	b := cmdBase(s)
	for _, fam := range [...]string{"python", "pypy", "perl", "ruby", "php", "lua", "luajit", "node", "nodejs", "pip"} {
		if strings.HasPrefix(b, fam) && versionSuffix(b[len(fam):]) {
			switch fam {
			case "pypy":
				return "python"
			case "luajit":
				return "lua"
			case "nodejs":
				return "node"
			}
			return fam
		}
	}
	switch {
	case b == "ipython" || b == "ipython3":
		return "python"
	case strings.HasPrefix(b, "mkfs.") || b == "mke2fs" || b == "mkswap" || b == "mkdosfs" || b == "mkntfs" || b == "newfs" || strings.HasPrefix(b, "newfs_"):
		return "mkfs"
	case b == "gawk" || b == "mawk" || b == "nawk" || b == "busybox-awk":
		return "awk"
	case b == "podman" || b == "nerdctl":
		return "docker"
	case b == "iptables-legacy" || b == "iptables-nft" || b == "ip6tables" || b == "ip6tables-legacy" || b == "ebtables" || b == "arptables":
		return "iptables"
	case b == "tofu":
		return "terraform"
	case b == "mongosh":
		return "mongo"
	case b == "mariadb":
		return "mysql"
	case b == "netcat" || b == "ncat" || b == "nc.traditional" || b == "nc.openbsd" || b == "cryptcat":
		return "nc"
	case b == "vim" || b == "nvim" || b == "vi" || b == "nano" || b == "emacs" || b == "pico" || b == "micro" ||
		b == "joe" || b == "ed" || b == "ex" || b == "mcedit" || b == "gedit" || b == "kate" || b == "code" || b == "subl":
		return "editor"
	}
	return b
}

func versionSuffix(s string) bool {
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '.' {
			return false
		}
	}
	return true
}

func isShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh", "rbash", "oksh", "pdksh", "ksh93", "posh":
		return true
	}
	return false
}

// globCandidates are the commands a glob in command position is matched
// against, most dangerous first.
var globCandidates = [...]string{
	"rm", "dd", "mkfs", "shred", "wipefs", "chmod", "chown", "sh", "bash", "dash", "zsh",
	"curl", "wget", "nc", "ncat", "socat", "python", "python3", "perl", "ruby", "php", "node",
	"kill", "killall", "pkill", "reboot", "shutdown", "poweroff", "halt", "sudo", "base64", "xxd",
	"crontab", "iptables", "mv", "cp", "tee", "cat", "find", "xargs", "env", "eval",
}

func globCommand(pattern string) (string, bool) {
	for _, c := range globCandidates {
		if ok, err := path.Match(pattern, c); err == nil && ok {
			return c, true
		}
	}
	return "", false
}

// handlerTable maps command names (as normName returns them) to the
// handler that applies their rules. Add a command here to give it a
// handler; commands with only subcommand or option rules need just a row in
// cliRules (registry.go).
var handlerTable = []struct {
	names string // space-separated
	h     handler
}{
	// shells and evaluation
	{"sh bash dash zsh ksh mksh ash yash fish csh tcsh rbash oksh pdksh ksh93 posh", (*analyzer).shell},
	{"eval", (*analyzer).eval},
	{"source .", (*analyzer).source},
	{"alias", (*analyzer).alias},
	{"hash", (*analyzer).hashCmd},
	{"trap", (*analyzer).trap},
	{"unset", (*analyzer).unset},
	{"export declare typeset readonly local setenv", (*analyzer).exportCmd},
	{"printf", (*analyzer).printfCmd},
	{"read", (*analyzer).readCmd},
	{"set", (*analyzer).setCmd},
	{"cd pushd", (*analyzer).cd},
	{"history", (*analyzer).history},
	{"shopt", (*analyzer).shopt},
	// wrappers
	{"env", (*analyzer).env},
	{"sudo", (*analyzer).sudo},
	{"su", (*analyzer).su},
	{"runuser", (*analyzer).runuser},
	{"exec", (*analyzer).execBuiltin},
	{"command", (*analyzer).command},
	{"busybox toybox", (*analyzer).busybox},
	{"xargs", (*analyzer).xargs},
	{"watch", (*analyzer).watch},
	{"flock", (*analyzer).flock},
	{"sg", (*analyzer).sg},
	{"script", (*analyzer).scriptCmd},
	{"parallel", (*analyzer).parallel},
	{"tmux", (*analyzer).tmux},
	{"ssh", (*analyzer).ssh},
	{"nix-shell", (*analyzer).nixShell},
	{"uv poetry pipenv pdm hatch rye", (*analyzer).runSub},
	{"bundle direnv conda mamba micromamba nix", (*analyzer).runSub},
	{"at batch", (*analyzer).at},
	// interpreters
	{"python perl ruby php lua node awk Rscript pwsh powershell deno bun osascript jshell tclsh expect julia", (*analyzer).interpreter},
	// files
	{"rm unlink rmdir srm", (*analyzer).rm},
	{"shred", (*analyzer).shred},
	{"find", (*analyzer).find},
	{"rsync", (*analyzer).rsync},
	{"mv", (*analyzer).mv},
	{"cp install", (*analyzer).cp},
	{"ln", (*analyzer).ln},
	{"tee sponge", (*analyzer).tee},
	{"truncate touch mkdir", (*analyzer).touchLike},
	{"sed", (*analyzer).sed},
	{"yq crudini dasel", (*analyzer).inplaceEditor},
	{"editor sudoedit", (*analyzer).editor},
	{"dd", (*analyzer).dd},
	{"mkfs", (*analyzer).mkfs},
	{"wipefs blkdiscard sgdisk gdisk fdisk sfdisk cfdisk parted hdparm cryptsetup badblocks nvme lvremove vgremove pvremove zpool mdadm diskutil", (*analyzer).disk},
	{"chmod chown chgrp setfacl", (*analyzer).chmod},
	{"chattr", (*analyzer).chattr},
	{"tar unzip bsdtar 7z cpio", (*analyzer).archive},
	{"mkfifo mknod", (*analyzer).mkfifo},
	// network
	{"curl wget http https xh aria2c fetch lwp-request httpie", (*analyzer).httpClient},
	{"nc telnet socat ztcp openssl", (*analyzer).netClient},
	{"scp sftp rclone gsutil mail mailx sendmail mutt dig nslookup host ping ftp tftp lftp gh", (*analyzer).netSink},
	// version control and data stores
	{"git", (*analyzer).git},
	{"psql mysql sqlite3 duckdb sqlcmd clickhouse-client clickhouse cockroach snowsql bq cqlsh", (*analyzer).sqlClient},
	{"redis-cli mongo dropdb mysqladmin dropuser", (*analyzer).database},
	{"rails rake mix prisma django-admin manage.py artisan", (*analyzer).dbTask},
	// system
	{"kill pkill killall killall5 skill", (*analyzer).kill},
	{"shutdown reboot poweroff halt init telinit systemctl service loginctl launchctl update-rc.d chkconfig rc-update rc-service", (*analyzer).system},
	{"crontab", (*analyzer).crontab},
	{"iptables ufw nft firewall-cmd setenforce aa-teardown aa-disable aa-complain auditctl pfctl csrutil spctl", (*analyzer).firewall},
	{"sysctl insmod rmmod modprobe kextload kextunload", (*analyzer).kernel},
	{"setcap", (*analyzer).setcap},
	{"gpg gpg2 security", (*analyzer).secretStore},
	{"passwd chpasswd chsh chfn useradd usermod userdel adduser deluser groupadd groupdel groupmod gpasswd visudo vipw vigr newusers dscl", (*analyzer).users},
	{"mount umount pivot_root losetup swapoff", (*analyzer).mount},
	{"journalctl", (*analyzer).journalctl},
	{"ip ifconfig nmcli ifdown networksetup", (*analyzer).network},
	{"docker kubectl oc helm terraform pulumi aws gcloud az doctl eksctl heroku fly flyctl vercel linode-cli hcloud s3cmd mc", (*analyzer).cloud},
	{"nsenter unshare chroot systemd-nspawn", (*analyzer).namespace},
	{"hermes-sandbox", (*analyzer).self},
	{"go rg fd fdfind sort man zip gdb npx npm pnpm ag fzf entr base64", (*analyzer).toolExec},
}

// handlers is handlerTable indexed by name (built in init: the table's
// handlers reach dispatch, so it cannot be a package-level initializer).
var handlers map[string]handler

func init() {
	handlers = map[string]handler{}
	for _, e := range handlerTable {
		for _, n := range strings.Fields(e.names) {
			handlers[n] = e.h
		}
	}
}

// dispatch returns the rule handler of a command, or nil.
func dispatch(name string) handler {
	if h := handlers[name]; h != nil {
		return h
	}
	if wrapSpecFor(name) != nil {
		return (*analyzer).wrapper
	}
	return nil
}
