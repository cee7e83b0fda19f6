package policy

import (
	"path"
	"strings"
)

// target is a resolved file argument.
type target struct {
	p          string // cleaned; absolute, or relative to the working tree
	rel        bool   // p is relative to the working tree
	dyn        bool   // p contains unresolved parts
	glob       bool   // p is a glob pattern
	cwdUnknown bool   // relative to a directory that is not known
}

func (a *analyzer) target(f field) target {
	s := f.s
	t := target{dyn: f.dyn, glob: f.glob}
	s = strings.TrimPrefix(s, "file://")
	if !strings.HasPrefix(s, "/") {
		switch {
		case a.cwdDyn:
			t.cwdUnknown, t.rel = true, true
			t.p = path.Clean(s)
			return t
		case a.cwd != "":
			s = a.cwd + "/" + s
		case a.c.workDir != "":
			s = a.c.workDir + "/" + s
		}
	}
	t.p = path.Clean(s)
	t.rel = !strings.HasPrefix(t.p, "/")
	return t
}

func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir) && len(p) > len(dir) && p[len(dir)] == '/'
}

var tempDirs = [...]string{"/tmp/", "/var/tmp/", "/dev/shm/", "/private/tmp/", "/private/var/tmp/", "/var/folders/", "/private/var/folders/"}

func isTemp(p string) bool {
	for _, d := range tempDirs {
		if strings.HasPrefix(p, d) && len(p) > len(d) {
			return true
		}
	}
	return false
}

// inside reports whether t is in the working tree or in a temp directory.
func (a *analyzer) inside(t target) bool {
	if t.cwdUnknown {
		return true
	}
	if t.rel {
		return t.p != ".." && !strings.HasPrefix(t.p, "../")
	}
	if a.c.workDir != "" && within(t.p, a.c.workDir) {
		return true
	}
	return isTemp(t.p)
}

// insidePrefix judges the static prefix of a partly unresolved path.
func (a *analyzer) insidePrefix(prefix string) bool {
	if !strings.HasPrefix(prefix, "/") {
		if strings.HasPrefix(prefix, "..") || strings.HasPrefix(prefix, "~") {
			return false
		}
		if a.cwd != "" && !a.cwdDyn {
			return a.insidePrefix(a.cwd + "/" + prefix)
		}
		return true
	}
	if a.c.workDir != "" && strings.HasPrefix(prefix, a.c.workDir+"/") && len(prefix) > len(a.c.workDir)+1 {
		return true
	}
	return isTemp(prefix)
}

// systemTops are directories whose recursive deletion is hardline.
var systemTops = map[string]bool{
	"/": true, "/bin": true, "/boot": true, "/dev": true, "/etc": true, "/home": true, "/lib": true,
	"/lib32": true, "/lib64": true, "/libx32": true, "/media": true, "/mnt": true, "/opt": true,
	"/proc": true, "/root": true, "/run": true, "/sbin": true, "/srv": true, "/sys": true, "/usr": true,
	"/var": true, "/snap": true, "/nix": true, "/efi": true, "/System": true, "/Library": true,
	"/Applications": true, "/Users": true, "/Volumes": true, "/private": true, "/private/etc": true,
	"/private/var": true, "/usr/bin": true, "/usr/sbin": true, "/usr/lib": true, "/usr/lib64": true,
	"/usr/local": true, "/usr/share": true, "/usr/include": true, "/usr/libexec": true,
	"/usr/local/bin": true, "/usr/local/lib": true, "/var/lib": true, "/var/log": true, "/var/spool": true,
	"/boot/efi": true, "/usr/src": true,
}

// systemWriteDirs are trees that a write into needs approval.
var systemWriteDirs = [...]string{
	"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/sys", "/proc",
	"/var/lib", "/var/spool", "/var/www", "/System", "/Library", "/private/etc", "/snap", "/root",
}

func (a *analyzer) isSystemWrite(p string) bool {
	for _, d := range systemWriteDirs {
		if within(p, d) {
			if d == "/root" && within(a.c.home, "/root") {
				return false
			}
			return true
		}
	}
	return false
}

// homeRel returns p relative to a home directory ("" for the home itself).
func (a *analyzer) homeRel(p string) (string, bool) {
	if within(p, a.c.home) {
		return strings.TrimPrefix(strings.TrimPrefix(p, a.c.home), "/"), true
	}
	for _, pre := range [...]string{"/home/", "/Users/"} {
		if strings.HasPrefix(p, pre) {
			user, rest, _ := strings.Cut(p[len(pre):], "/")
			if user != "" {
				return rest, true
			}
		}
	}
	if within(p, "/root") {
		return strings.TrimPrefix(strings.TrimPrefix(p, "/root"), "/"), true
	}
	return "", false
}

func (a *analyzer) isHomeDir(p string) bool {
	rel, ok := a.homeRel(p)
	return ok && rel == ""
}

// globHits reports which protected classes a delete glob could match.
func (a *analyzer) globHits(p string) (root, system, home bool) {
	i := strings.IndexAny(p, "*?[")
	if i < 0 {
		return
	}
	dir := p[:strings.LastIndexByte(p[:i], '/')+1]
	base := p[len(dir):]
	if j := strings.IndexByte(base, '/'); j < 0 && broadGlob(base) {
		d := path.Clean(dir)
		switch {
		case d == "/":
			root = true
		case systemTops[d]:
			system = true
		case a.isHomeDir(d):
			home = true
		}
	}
	for top, ok := range systemTops {
		if ok && matchGlob(p, top) {
			system = true
			break
		}
	}
	if matchGlob(p, a.c.home) {
		home = true
	}
	return
}

func broadGlob(s string) bool {
	s = strings.Map(func(r rune) rune {
		if strings.ContainsRune("*?.{},!", r) {
			return -1
		}
		return r
	}, s)
	for {
		i := strings.IndexByte(s, '[')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], ']')
		if j < 0 {
			break
		}
		s = s[:i] + s[i+j+1:]
	}
	return s == ""
}

func matchGlob(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// Credentials and other secrets.

var credHomeFiles = map[string]bool{
	".netrc": true, ".git-credentials": true, ".docker/config.json": true, ".kube/config": true,
	".pgpass": true, ".my.cnf": true, ".npmrc": true, ".pypirc": true, ".vault-token": true,
	".config/gh/hosts.yml": true, ".config/hub": true, ".terraform.d/credentials.tfrc.json": true,
	".cargo/credentials": true, ".cargo/credentials.toml": true, ".gem/credentials": true,
	".kaggle/kaggle.json": true, ".cache/huggingface/token": true, ".huggingface/token": true,
	".aws/credentials": true, ".boto": true, ".s3cfg": true, ".config/rclone/rclone.conf": true,
	".ssh": true, ".aws": true, ".gnupg": true, ".config/gcloud": true, ".azure": true,
	".password-store": true, ".local/share/keyrings": true, ".config/hermes-sandbox/secrets.yaml": true,
	".config/hermes-sandbox/secrets.yml": true, ".kube": true, ".oci/config": true, ".config/doctl/config.yaml": true,
	".codex/auth.json": true, ".claude/.credentials.json": true, ".hermes/.env": true, ".gemini/oauth_creds.json": true,
	".config/github-copilot/hosts.json": true, ".config/github-copilot/apps.json": true, ".local/share/opencode/auth.json": true,
}

var credHomeDirs = [...]string{".gnupg/", ".config/gcloud/", ".azure/", ".password-store/", ".local/share/keyrings/", ".aws/sso/", ".aws/cli/cache/"}

// isCredential reports whether t is a high-value credential.
func (a *analyzer) isCredential(t target) bool {
	if t.dyn {
		return false
	}
	p := t.p
	if rel, ok := a.homeRel(p); ok && rel != "" {
		if credHomeFiles[rel] {
			return true
		}
		if strings.HasPrefix(rel, ".ssh/") {
			switch base := path.Base(rel); {
			case strings.HasSuffix(base, ".pub"), base == "config", base == "environment", base == "rc",
				strings.HasPrefix(base, "known_hosts"), strings.HasPrefix(base, "authorized_keys"):
				return false
			}
			return true
		}
		for _, d := range credHomeDirs {
			if strings.HasPrefix(rel, d) {
				return true
			}
		}
		if t.glob {
			for _, c := range [...]string{".ssh/id_rsa", ".ssh/id_ed25519", ".aws/credentials", ".netrc", ".git-credentials", ".docker/config.json", ".kube/config"} {
				if matchGlob(rel, c) {
					return true
				}
			}
		}
	}
	switch p {
	case "/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/master.passwd",
		"/etc/security/opasswd", "/etc/kubernetes/admin.conf", "/etc/sudoers":
		return p != "/etc/sudoers"
	}
	if strings.HasPrefix(p, "/etc/ssh/ssh_host_") && !strings.HasSuffix(p, ".pub") {
		return true
	}
	if within(p, "/etc/ssl/private") || within(p, "/run/secrets") || within(p, "/var/run/secrets") {
		return true
	}
	if strings.HasPrefix(p, "/proc/") && strings.HasSuffix(p, "/environ") {
		return true
	}
	return t.glob && (matchGlob(p, "/etc/shadow") || matchGlob(p, "/etc/gshadow"))
}

// isSecretSource reports whether sending t to the network leaks a secret.
func (a *analyzer) isSecretSource(t target) bool {
	if t.dyn {
		return false
	}
	if a.isCredential(t) || a.isHistory(t.p) {
		return true
	}
	base := path.Base(t.p)
	if base == ".env" || strings.HasPrefix(base, ".env.") {
		for _, s := range [...]string{"example", "sample", "template", "dist", "defaults"} {
			if strings.HasSuffix(base, s) {
				return false
			}
		}
		return true
	}
	switch base {
	case "secrets.yaml", "secrets.yml", "secrets.json", "credentials.json", "credentials", "service-account.json",
		"serviceAccountKey.json", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", ".netrc", ".pgpass", ".npmrc",
		".pypirc", ".git-credentials", "master.key", "credentials.yml.enc", "terraform.tfstate", "kubeconfig":
		return true
	}
	switch path.Ext(base) {
	case ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk":
		return true
	}
	return t.p == "/etc/passwd"
}

func (a *analyzer) isHistory(p string) bool {
	rel, ok := a.homeRel(p)
	if !ok {
		return false
	}
	switch rel {
	case ".bash_history", ".zsh_history", ".history", ".sh_history", ".zhistory", ".local/share/fish/fish_history":
		return true
	}
	base := path.Base(rel)
	return strings.HasPrefix(base, ".") && strings.HasSuffix(base, "_history") && path.Dir(rel) == "."
}

var rcHomeFiles = map[string]bool{
	".bashrc": true, ".bash_profile": true, ".bash_login": true, ".bash_logout": true, ".profile": true,
	".zshrc": true, ".zshenv": true, ".zprofile": true, ".zlogin": true, ".zlogout": true, ".cshrc": true,
	".tcshrc": true, ".kshrc": true, ".mkshrc": true, ".config/fish/config.fish": true, ".pam_environment": true,
	".xprofile": true, ".xinitrc": true, ".xsession": true, ".inputrc": true, ".bash_aliases": true, ".envrc": true,
}

func (a *analyzer) isRC(p string) bool {
	if rel, ok := a.homeRel(p); ok {
		return rcHomeFiles[rel] || strings.HasPrefix(rel, ".config/fish/conf.d/") || strings.HasPrefix(rel, ".oh-my-zsh/custom/")
	}
	switch p {
	case "/etc/profile", "/etc/bash.bashrc", "/etc/bashrc", "/etc/zshrc", "/etc/zprofile", "/etc/zshenv",
		"/etc/environment", "/etc/csh.cshrc", "/etc/csh.login", "/etc/zsh/zshrc", "/etc/zsh/zshenv", "/etc/zsh/zprofile":
		return true
	}
	return within(p, "/etc/profile.d")
}

func isAuthorizedKeys(p string) bool {
	b := path.Base(p)
	return b == "authorized_keys" || b == "authorized_keys2"
}

func (a *analyzer) isSSHDir(p string) bool {
	rel, ok := a.homeRel(p)
	if !ok || !(rel == ".ssh" || strings.HasPrefix(rel, ".ssh/")) {
		return false
	}
	return !strings.HasPrefix(path.Base(rel), "known_hosts")
}

func isCronPath(p string) bool {
	for _, d := range [...]string{"/etc/crontab", "/etc/cron.d", "/etc/cron.daily", "/etc/cron.hourly", "/etc/cron.weekly",
		"/etc/cron.monthly", "/etc/anacrontab", "/var/spool/cron", "/var/spool/anacron", "/var/spool/at", "/var/at",
		"/usr/lib/cron/tabs", "/private/var/at", "/etc/periodic"} {
		if within(p, d) {
			return true
		}
	}
	return false
}

func (a *analyzer) isServicePath(p string) bool {
	for _, d := range [...]string{"/etc/systemd", "/lib/systemd/system", "/usr/lib/systemd", "/etc/init.d", "/etc/init",
		"/etc/rc.local", "/etc/rc.d", "/etc/xdg/autostart", "/Library/LaunchAgents", "/Library/LaunchDaemons",
		"/System/Library/LaunchDaemons", "/etc/update-motd.d"} {
		if within(p, d) {
			return true
		}
	}
	if rel, ok := a.homeRel(p); ok {
		for _, d := range [...]string{".config/systemd", "Library/LaunchAgents", ".config/autostart", ".local/share/systemd"} {
			if within(rel, d) {
				return true
			}
		}
	}
	return false
}

func isLDPreload(p string) bool {
	return p == "/etc/ld.so.preload" || p == "/etc/ld.so.conf" || within(p, "/etc/ld.so.conf.d")
}

func isGitHook(p string) bool {
	return strings.Contains(p, "/.git/hooks/") || strings.HasPrefix(p, ".git/hooks/") ||
		strings.HasSuffix(p, "/.git/hooks") || p == ".git/hooks"
}

func isLogPath(p string) bool {
	for _, d := range [...]string{"/var/log", "/var/adm", "/private/var/log", "/run/utmp", "/var/run/utmp", "/var/audit", "/run/log/journal"} {
		if within(p, d) {
			return true
		}
	}
	return false
}

func isUserDB(p string) bool {
	switch p {
	case "/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers":
		return true
	}
	return within(p, "/etc/sudoers.d")
}

// Devices.

type devKind int

const (
	devNone  devKind = iota // not a device, or a harmless one
	devBlock                // a disk or raw memory
	devOther
)

func deviceKind(p string) devKind {
	if !strings.HasPrefix(p, "/dev/") {
		return devNone
	}
	n := p[len("/dev/"):]
	switch {
	case n == "null" || n == "zero" || n == "full" || n == "random" || n == "urandom" || n == "stdin" ||
		n == "stdout" || n == "stderr" || n == "ptmx" || n == "console" || n == "log" || n == "kmsg":
		return devNone
	case strings.HasPrefix(n, "tty") || strings.HasPrefix(n, "fd/") || strings.HasPrefix(n, "pts/") ||
		strings.HasPrefix(n, "shm/") || strings.HasPrefix(n, "tcp/") || strings.HasPrefix(n, "udp/") || strings.HasPrefix(n, "std"):
		return devNone
	}
	letterNext := func(pre string) bool {
		return strings.HasPrefix(n, pre) && len(n) > len(pre) && (n[len(pre)] >= 'a' && n[len(pre)] <= 'z' || strings.IndexByte("*?[", n[len(pre)]) >= 0)
	}
	digitNext := func(pre string) bool {
		return strings.HasPrefix(n, pre) && len(n) > len(pre) && (n[len(pre)] >= '0' && n[len(pre)] <= '9' || strings.IndexByte("*?[", n[len(pre)]) >= 0)
	}
	switch {
	case letterNext("sd"), letterNext("hd"), letterNext("vd"), letterNext("xvd"), strings.HasPrefix(n, "nvme"),
		strings.HasPrefix(n, "mmcblk"), strings.HasPrefix(n, "disk"), strings.HasPrefix(n, "rdisk"),
		strings.HasPrefix(n, "dm-"), digitNext("md"), strings.HasPrefix(n, "md/"), strings.HasPrefix(n, "mapper/"),
		digitNext("sr"), digitNext("fd"), n == "root", n == "mem", n == "kmem", n == "port", digitNext("nbd"),
		strings.HasPrefix(n, "bcache"), digitNext("zd"), digitNext("rbd"), strings.HasPrefix(n, "block/"):
		return devBlock
	}
	return devOther
}

// The sandbox's own files.

var protectedNames = map[string]bool{
	"config.yaml": true, "config.yml": true, "secrets.yaml": true, "secrets.yml": true, "audit.log": true, "audit.jsonl": true,
}

// isProtected reports whether t is, or is inside, one of the sandbox's own
// config, secrets or audit paths.
func (a *analyzer) isProtected(t target) bool {
	p := t.p
	if t.glob {
		for _, c := range a.protectedPaths() {
			if matchGlob(p, c) || matchGlob(p, c+"/config.yaml") {
				return true
			}
		}
	}
	if rel, ok := a.homeRel(p); ok && (within(rel, ".config/hermes-sandbox") || within(rel, ".local/state/hermes-sandbox")) {
		return true
	}
	if within(p, "/etc/hermes-sandbox") {
		return true
	}
	if protectedNames[path.Base(p)] && path.Base(path.Dir(p)) == "hermes-sandbox" {
		return true
	}
	for _, pp := range a.c.protected {
		if within(p, pp) {
			return true
		}
	}
	return false
}

func (a *analyzer) protectedPaths() []string {
	out := []string{a.c.home + "/.config/hermes-sandbox", a.c.home + "/.local/state/hermes-sandbox", "/etc/hermes-sandbox"}
	return append(out, a.c.protected...)
}

// holdsProtected reports whether deleting or moving t removes a protected
// path: t is one, or contains one.
func (a *analyzer) holdsProtected(t target) bool {
	if a.isProtected(t) {
		return true
	}
	if t.rel || t.p == "/" {
		return false
	}
	for _, c := range a.protectedPaths() {
		if within(c, t.p) {
			return true
		}
		if t.glob {
			for d := c; d != "/" && d != "."; d = path.Dir(d) {
				if matchGlob(t.p, d) {
					return true
				}
			}
		}
	}
	return false
}

// protectedPrefix reports whether a partly unresolved path starts inside a
// protected directory.
func (a *analyzer) protectedPrefix(s string) bool {
	i := strings.IndexByte(s, unk)
	if i <= 0 {
		return false
	}
	prefix := s[:i]
	j := strings.LastIndexByte(prefix, '/')
	if j <= 0 {
		return false
	}
	return a.isProtected(a.target(lit(prefix[:j])))
}
