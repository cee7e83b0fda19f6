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
		return a.dynamicCommand(f0, in)
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
	if f0.glob {
		g, ok := globCommand(cmdBase(raw))
		if !ok {
			a.add(ruleDynamicCommand)
			return desc{t: in.t}
		}
		name = g
	}
	a.lastCmd, a.lastArgc = name, len(argv)-1
	a.noteRun(name)
	a.wantExec(raw, f0)
	if strings.ContainsRune(raw, '/') && a.files != nil {
		if d, ok := a.files[a.target(f0).p]; ok {
			if d.t&tRemote != 0 {
				a.add(ruleDownloadExec)
			}
			if d.known {
				a.shellStdin(d)
			}
		}
	}
	c := &call{name: name, argv0: f0, args: argv[1:], in: in}
	if h := dispatch(name); h != nil {
		h(a, c)
	} else {
		a.generic(c)
	}
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

func (a *analyzer) dynamicCommand(f0 field, in desc) desc {
	switch {
	case f0.t&tRemote != 0:
		a.add(rulePipeShell)
	case f0.t&tDecoded != 0:
		a.add(ruleObfuscated)
	}
	if !(f0.posRef && a.inFuncDef()) {
		a.add(ruleDynamicCommand)
	}
	return desc{t: in.t}
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

// dispatch returns the rule handler of a command, or nil.
func dispatch(name string) handler {
	switch name {
	// shells and evaluation
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "fish", "csh", "tcsh", "rbash", "oksh", "pdksh", "ksh93", "posh":
		return (*analyzer).shell
	case "eval":
		return (*analyzer).eval
	case "source", ".":
		return (*analyzer).source
	case "alias":
		return (*analyzer).alias
	case "trap":
		return (*analyzer).trap
	case "unset":
		return (*analyzer).unset
	case "export", "declare", "typeset", "readonly", "local", "setenv":
		return (*analyzer).exportCmd
	case "printf":
		return (*analyzer).printfCmd
	case "read":
		return (*analyzer).readCmd
	case "set":
		return (*analyzer).setCmd
	case "cd", "pushd":
		return (*analyzer).cd
	case "history":
		return (*analyzer).history
	case "shopt":
		return (*analyzer).shopt

	// wrappers
	case "env":
		return (*analyzer).env
	case "sudo":
		return (*analyzer).sudo
	case "su":
		return (*analyzer).su
	case "runuser":
		return (*analyzer).runuser
	case "exec":
		return (*analyzer).execBuiltin
	case "command":
		return (*analyzer).command
	case "busybox", "toybox":
		return (*analyzer).busybox
	case "xargs":
		return (*analyzer).xargs
	case "watch":
		return (*analyzer).watch
	case "flock":
		return (*analyzer).flock
	case "sg":
		return (*analyzer).sg
	case "script":
		return (*analyzer).scriptCmd
	case "parallel":
		return (*analyzer).parallel
	case "tmux":
		return (*analyzer).tmux
	case "ssh":
		return (*analyzer).ssh
	case "nix-shell":
		return (*analyzer).nixShell
	case "uv", "poetry", "pipenv", "pdm", "hatch", "rye":
		return (*analyzer).runSub
	case "bundle", "direnv", "conda", "mamba", "micromamba", "nix":
		return (*analyzer).runSub
	case "at", "batch":
		return (*analyzer).at

	// interpreters
	case "python", "perl", "ruby", "php", "lua", "node", "awk", "Rscript", "pwsh", "powershell", "deno", "bun", "osascript", "jshell", "tclsh", "expect":
		return (*analyzer).interpreter

	// files
	case "rm", "unlink", "rmdir", "srm":
		return (*analyzer).rm
	case "shred":
		return (*analyzer).shred
	case "find":
		return (*analyzer).find
	case "rsync":
		return (*analyzer).rsync
	case "mv":
		return (*analyzer).mv
	case "cp", "install":
		return (*analyzer).cp
	case "ln":
		return (*analyzer).ln
	case "tee", "sponge":
		return (*analyzer).tee
	case "truncate", "touch", "mkdir":
		return (*analyzer).touchLike
	case "sed":
		return (*analyzer).sed
	case "yq", "crudini", "dasel":
		return (*analyzer).inplaceEditor
	case "editor", "sudoedit":
		return (*analyzer).editor
	case "dd":
		return (*analyzer).dd
	case "mkfs":
		return (*analyzer).mkfs
	case "wipefs", "blkdiscard", "sgdisk", "gdisk", "fdisk", "sfdisk", "cfdisk", "parted", "hdparm", "cryptsetup", "badblocks", "nvme", "lvremove", "vgremove", "pvremove", "zpool", "mdadm", "diskutil":
		return (*analyzer).disk
	case "chmod", "chown", "chgrp", "setfacl":
		return (*analyzer).chmod
	case "chattr":
		return (*analyzer).chattr
	case "tar", "unzip", "bsdtar", "7z", "cpio":
		return (*analyzer).archive
	case "mkfifo", "mknod":
		return (*analyzer).mkfifo

	// network
	case "curl", "wget", "http", "https", "xh", "aria2c", "fetch", "lwp-request", "httpie":
		return (*analyzer).httpClient
	case "nc", "telnet", "socat", "ztcp", "openssl":
		return (*analyzer).netClient
	case "scp", "sftp", "rclone", "gsutil", "mail", "mailx", "sendmail", "mutt", "dig", "nslookup", "host", "ping", "ftp", "tftp", "lftp", "gh":
		return (*analyzer).netSink

	// version control and data stores
	case "git":
		return (*analyzer).git
	case "psql", "mysql", "sqlite3", "duckdb", "sqlcmd", "clickhouse-client", "clickhouse", "cockroach", "snowsql", "bq", "cqlsh":
		return (*analyzer).sqlClient
	case "redis-cli", "mongo", "dropdb", "mysqladmin", "dropuser":
		return (*analyzer).database
	case "rails", "rake", "mix", "prisma", "django-admin", "manage.py", "artisan":
		return (*analyzer).dbTask

	// system
	case "kill", "pkill", "killall", "killall5", "skill":
		return (*analyzer).kill
	case "shutdown", "reboot", "poweroff", "halt", "init", "telinit", "systemctl", "service", "loginctl", "launchctl", "update-rc.d", "chkconfig", "rc-update", "rc-service":
		return (*analyzer).system
	case "crontab":
		return (*analyzer).crontab
	case "iptables", "ufw", "nft", "firewall-cmd", "setenforce", "aa-teardown", "aa-disable", "aa-complain", "auditctl", "pfctl", "csrutil", "spctl":
		return (*analyzer).firewall
	case "sysctl", "insmod", "rmmod", "modprobe", "kextload", "kextunload":
		return (*analyzer).kernel
	case "setcap":
		return (*analyzer).setcap
	case "gpg", "gpg2", "security":
		return (*analyzer).secretStore
	case "passwd", "chpasswd", "chsh", "chfn", "useradd", "usermod", "userdel", "adduser", "deluser", "groupadd", "groupdel", "groupmod", "gpasswd", "visudo", "vipw", "vigr", "newusers", "dscl":
		return (*analyzer).users
	case "mount", "umount", "pivot_root", "losetup", "swapoff":
		return (*analyzer).mount
	case "journalctl":
		return (*analyzer).journalctl
	case "ip", "ifconfig", "nmcli", "ifdown", "networksetup":
		return (*analyzer).network
	case "docker", "kubectl", "oc", "helm", "terraform", "pulumi", "aws", "gcloud", "az", "doctl", "eksctl", "heroku", "fly", "flyctl", "vercel", "linode-cli", "hcloud", "s3cmd", "mc":
		return (*analyzer).cloud
	case "nsenter", "unshare", "chroot", "systemd-nspawn":
		return (*analyzer).namespace
	case "hermes-sandbox":
		return (*analyzer).self
	case "go", "rg", "fd", "fdfind", "sort", "man", "zip", "gdb", "npx", "npm", "pnpm":
		return (*analyzer).toolExec
	}
	if wrapSpecFor(name) != nil {
		return (*analyzer).wrapper
	}
	return nil
}
