package policy

import (
	"net/url"
	"path"
	"strings"
)

// Credentials read by other doors, exfiltration through DNS, git and
// uploads, destructive HTTP requests, and exposure of local services.

// isDotEnv reports whether p is an environment file with secrets (.env,
// .env.production), not a template (.env.example).
func isDotEnv(p string) bool {
	base := path.Base(p)
	if base != ".env" && !strings.HasPrefix(base, ".env.") {
		return false
	}
	for _, s := range [...]string{"example", "sample", "template", "dist", "defaults", "tmpl", "schema"} {
		if strings.Contains(base, s) {
			return false
		}
	}
	return true
}

// browserStores are files in which browsers keep passwords and cookies.
var browserStores = [...]string{"logins.json", "key4.db", "key3.db", "cookies.sqlite", "Login Data", "Cookies", "Web Data", "signons.sqlite"}

func isBrowserStore(p string) bool {
	if !strings.Contains(p, "firefox") && !strings.Contains(p, "chrom") && !strings.Contains(p, "Chrome") &&
		!strings.Contains(p, "BraveSoftware") && !strings.Contains(p, "Edge") && !strings.Contains(p, "mozilla") {
		return false
	}
	base := path.Base(p)
	for _, s := range browserStores {
		if base == s {
			return true
		}
	}
	return false
}

// fileReaders print or copy the files they are given.
var fileReaders = map[string]bool{
	"cat": true, "less": true, "more": true, "head": true, "tail": true, "bat": true, "batcat": true, "strings": true,
	"xxd": true, "od": true, "hexdump": true, "base64": true, "nl": true, "tac": true, "sqlite3": true, "cp": true,
	"type": true, "get-content": true, "gc": true, "view": true, "jq": true, "yq": true, "awk": true, "sort": true,
	"source": false, "grep": true, "rg": true, "scp": true, "rsync": true, "tar": true, "zip": true,
}

// keyMarkers are text that only private keys and credential files contain.
var keyMarkers = [...]string{"private key", "begin openssh", "begin rsa", "begin ec ", "begin dsa", "begin pgp private",
	"aws_secret_access_key", "-----begin", "ghp_", "xox", "sk-ant-", "secret_key"}

// netRules applies the credential, exfiltration and exposure rules.
func (a *analyzer) netRules(c *call) {
	if fileReaders[c.name] {
		for _, f := range c.args {
			if strings.HasPrefix(f.s, "-") {
				continue
			}
			switch {
			case strings.HasPrefix(f.s, "/proc/") && strings.HasSuffix(f.s, "/environ"):
				a.add(ruleReadCreds)
			case f.dyn:
			case isDotEnv(f.s) && c.name != "cp" && !a.inside(a.target(f)), isBrowserStore(a.target(f).p):
				a.add(ruleReadCreds)
			}
		}
	}
	switch c.name {
	case "dig", "nslookup", "host", "drill", "ping", "ping6", "traceroute", "getent", "resolvectl", "kdig", "delv":
		for _, f := range c.args {
			if !strings.HasPrefix(f.s, "-") && (f.subst && f.dyn || f.t&tSecret != 0) {
				a.add(ruleExfil) // data smuggled in a name lookup
			}
		}
	case "grep", "egrep", "fgrep", "rg", "ag", "ack", "git-grep":
		recursive := c.name == "rg" || c.name == "ag" || c.name == "ack"
		hunt, secretWord := false, false
		for _, f := range c.args {
			s := strings.ToLower(f.s)
			if s == "-r" || s == "--recursive" || s == "-rl" || s == "-rn" || strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && strings.ContainsAny(f.s, "rR") {
				recursive = true
			}
			for _, m := range keyMarkers {
				if strings.Contains(s, m) {
					hunt = true
				}
			}
			for _, w := range [...]string{"token", "secret", "passw", "api_key", "apikey", "aws_", "credential", "private"} {
				if strings.Contains(s, w) {
					secretWord = true
				}
			}
		}
		if hunt && recursive {
			a.add(ruleKeyHunt)
		}
		if secretWord && c.in.t&tSecret != 0 {
			a.add(ruleCloudSecret) // env | grep -i token
		}
	case "find", "fd", "fdfind":
		if c.name == "find" {
			roots, _, _ := findParse(c.args)
			outside := false
			for _, r := range roots {
				if !r.dyn && !a.inside(a.target(r)) || r.dyn {
					outside = true
				}
			}
			if outside && findNamesSecrets(c.args) {
				a.add(ruleKeyHunt)
			}
		}
	case "git":
		a.gitRemotes(c.args)
	case "curl", "http", "https", "xh", "wget", "httpie", "curlie":
		a.httpRules(c)
	case "ssh", "autossh":
		a.sshRules(c)
	case "python":
		args := c.args
		for i := 0; i+1 < len(args); i++ {
			if args[i].s == "-m" && (args[i+1].s == "http.server" || args[i+1].s == "SimpleHTTPServer") {
				a.serveDir(args[i+2:], "-d", "--directory")
			}
		}
	case "php":
		for _, f := range c.args {
			if f.s == "-S" {
				a.serveDir(c.args, "-t", "--docroot")
			}
		}
	case "busybox", "httpd":
		for i, f := range c.args {
			if f.s == "httpd" && c.name == "busybox" {
				a.serveDir(c.args[i+1:], "-h", "")
			}
		}
	case "rsync", "scp", "rclone", "aws", "gsutil", "azcopy", "s3cmd", "mc":
		a.uploadHome(c)
	case "brew":
		if len(c.args) > 0 && (c.args[0].s == "uninstall" || c.args[0].s == "remove" || c.args[0].s == "rm") {
			for _, f := range c.args[1:] {
				if f.dyn && f.subst {
					a.add(ruleDeleteOutside) // every package listed at run time
				}
			}
		}
	case "docker":
		root := ""
		for i, f := range c.args {
			if (f.s == "-v" || f.s == "--volume") && i+1 < len(c.args) {
				src, dst, _ := strings.Cut(c.args[i+1].s, ":")
				a.hostMount(a.expandHome(src))
				if src == "/" {
					root, _, _ = strings.Cut(dst, ":")
				}
			}
		}
		if root != "" && root != "/" {
			// The host's root is mounted at root: judge the container's
			// command as if it ran on the host.
			argv := dockerRunCommand(c.args)
			for k, f := range argv {
				if f.s == root || strings.HasPrefix(f.s, root+"/") {
					argv[k].s = "/" + strings.TrimPrefix(strings.TrimPrefix(f.s, root), "/")
				}
			}
			if len(argv) > 0 {
				a.exec(argv, desc{})
			}
		}
	}
}

// findNamesSecrets reports whether find's name patterns pick out keys or
// credential files.
func findNamesSecrets(args []field) bool {
	for i, f := range args {
		switch f.s {
		case "-name", "-iname", "-path", "-ipath", "-wholename", "-regex", "-iregex":
			if i+1 >= len(args) || args[i+1].dyn {
				continue
			}
			pat := strings.ToLower(path.Base(args[i+1].s))
			for _, n := range secretNames {
				if pat == n || strings.ContainsAny(pat, "*?[") && matchGlob(pat, n) && !broadGlob(pat) {
					return true
				}
			}
		}
	}
	return false
}

// serveDir flags a web server that serves a directory outside the
// working tree (python3 -m http.server --directory /).
func (a *analyzer) serveDir(args []field, short, long string) {
	for i, f := range args {
		var v field
		switch {
		case (f.s == short || f.s == long && long != "") && i+1 < len(args):
			v = args[i+1]
		case long != "" && strings.HasPrefix(f.s, long+"="):
			v = f
			v.s = f.s[len(long)+1:]
		default:
			continue
		}
		t := a.target(v)
		if v.dyn || !a.inside(t) || t.p == "/" {
			a.add(ruleExposure)
		}
	}
}

// gitRemotes tracks remotes added in the command and flags pushing to a
// URL or to such a remote.
func (a *analyzer) gitRemotes(args []field) {
	p := optSpecs["git"].parse(args)
	pos := p.pos
	if len(pos) == 0 {
		return
	}
	switch pos[0].s {
	case "remote":
		// The first remote of a new repository (remote add origin) is routine;
		// re-pointing an existing one is not.
		if len(pos) >= 4 && (pos[1].s == "add" && pos[2].s != "origin" || pos[1].s == "set-url") {
			if a.newRemotes == nil {
				a.newRemotes = map[string]bool{}
			}
			a.newRemotes[pos[2].s] = true
		}
	case "push":
		sub := 0
		for k, f := range args {
			if f.s == "push" {
				sub = k
				break
			}
		}
		q := optSpecs["git push"].parse(args[sub+1:])
		if v, ok := q.value("--repo"); ok {
			q.pos = append([]field{v}, q.pos...)
		}
		if len(q.pos) == 0 {
			return
		}
		r := q.pos[0]
		if a.newRemotes[r.s] || strings.Contains(r.s, "://") || isRemoteSpec(r.s) && strings.Contains(r.s, "@") {
			a.add(ruleExfil)
		}
		// "git push origin :ref" is a cryptic spelling of a delete; --delete
		// of a release, production or version ref is more than tidying up.
		deleting := q.has("--delete", "-d")
		for _, ref := range q.pos[1:] {
			name := strings.TrimPrefix(strings.TrimPrefix(ref.s, ":"), "refs/heads/")
			if strings.HasPrefix(ref.s, ":") && len(ref.s) > 1 || deleting && releaseRef(name) {
				a.add(ruleGitRemoteRefDelete)
			}
		}
	case "stash":
		if len(pos) > 1 && (pos[1].s == "clear" || pos[1].s == "drop") {
			a.add(ruleDeleteVCS)
		}
	}
}

// trustedAPIHost reports whether a credential sent to host is sent to the
// service it belongs to or to this machine.
func trustedAPIHost(host string) bool {
	host = strings.ToLower(host)
	switch host {
	case "localhost", "127.0.0.1", "::1", "[::1]":
		return true
	}
	for _, d := range [...]string{"github.com", "githubusercontent.com", "gitlab.com", "bitbucket.org", "openai.com", "anthropic.com",
		"googleapis.com", "amazonaws.com", "azure.com", "microsoft.com", "huggingface.co", "npmjs.org", "pypi.org",
		"docker.io", "docker.com", "slack.com", "stripe.com", "cloudflare.com", "vercel.com", "heroku.com", "sentry.io"} {
		if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

func urlHost(s string) string {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// httpRules judges the method, target and socket of an HTTP request.
func (a *analyzer) httpRules(c *call) {
	method := ""
	socket := ""
	var urls []string
	secret := false
	args := c.args
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if args[i].t&tSecret != 0 && !authHeader(args, i) {
			secret = true
		}
		switch {
		case (s == "-X" || s == "--request" || s == "--method") && i+1 < len(args):
			method = strings.ToUpper(args[i+1].s)
			i++
		case strings.HasPrefix(s, "-X") && len(s) > 2:
			method = strings.ToUpper(s[2:])
		case strings.HasPrefix(s, "--request=") || strings.HasPrefix(s, "--method="):
			method = strings.ToUpper(s[strings.IndexByte(s, '=')+1:])
		case s == "--unix-socket" && i+1 < len(args):
			socket = args[i+1].s
			i++
		case strings.HasPrefix(s, "-"):
		case c.name != "curl" && c.name != "wget" && i == 0 && (s == "DELETE" || s == "delete"):
			method = "DELETE"
		case strings.Contains(s, "://") || strings.HasPrefix(s, "localhost") || strings.HasPrefix(s, ":") || strings.Contains(s, "/"):
			urls = append(urls, s)
		}
	}
	for _, u := range urls {
		host := urlHost(strings.TrimPrefix(u, ":"))
		if strings.HasPrefix(u, ":") {
			host = "localhost"
		}
		if secret && !trustedAPIHost(host) {
			a.add(ruleExfil)
		}
		if strings.Contains(u, "_delete_by_query") || strings.Contains(u, "/_all") && method == "DELETE" {
			a.add(ruleHTTPDelete)
			continue
		}
		if method == "DELETE" {
			last := path.Base(strings.SplitN(strings.SplitN(u, "?", 2)[0], "#", 2)[0])
			local := host == "localhost" || host == "127.0.0.1" || host == "::1"
			if !(local && idLike(last)) {
				a.add(ruleHTTPDelete)
			}
		}
	}
	if strings.Contains(socket, "docker.sock") || strings.Contains(socket, "containerd.sock") || strings.Contains(socket, "podman.sock") {
		for _, f := range args {
			s := strings.ToLower(strings.ReplaceAll(f.s, " ", ""))
			if strings.Contains(s, "\"privileged\":true") || strings.Contains(s, "\"/:/") || strings.Contains(s, "\"pidmode\":\"host\"") {
				a.add(ruleContainerEscape)
			}
		}
	}
}

// idLike reports whether a URL's last segment names one item (a number or
// a UUID), not a collection or an index.
func idLike(s string) bool {
	if s == "" {
		return false
	}
	digits, hex := 0, 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == '-':
			hex++
		default:
			return false
		}
	}
	return digits > 0 && (hex == 0 || len(s) >= 32)
}

// sshRules flags remote and dynamic forwards (exposure) and scripts fed to
// a remote shell on stdin.
func (a *analyzer) sshRules(c *call) {
	p := optSpecs["ssh"].parse(c.args)
	if p.has("-R") {
		a.add(ruleExposure)
	}
	if v, ok := p.value("-D"); ok && (strings.HasPrefix(v.s, "0.0.0.0:") || strings.HasPrefix(v.s, "*:") || strings.HasPrefix(v.s, ":")) {
		a.add(ruleExposure)
	}
	if v, ok := p.value("-L"); ok && (strings.HasPrefix(v.s, "0.0.0.0:") || strings.HasPrefix(v.s, "*:")) {
		a.add(ruleExposure)
	}
	if len(p.pos) == 1 && c.in.known && strings.TrimSpace(c.in.text) != "" {
		// ssh HOST <<EOF: the remote shell runs stdin.
		a.shellStdin(c.in)
	}
}

// uploadHome flags copying the home directory, or a document folder in
// it, to another host or a bucket.
func (a *analyzer) uploadHome(c *call) {
	var pos []field
	for _, f := range c.args {
		if !strings.HasPrefix(f.s, "-") {
			pos = append(pos, f)
		}
	}
	if c.name == "aws" || c.name == "gsutil" || c.name == "mc" || c.name == "rclone" {
		if len(pos) > 0 && (pos[0].s == "s3" || pos[0].s == "-m") {
			pos = pos[1:]
		}
		if len(pos) > 0 {
			pos = pos[1:] // the verb
		}
	}
	if len(pos) < 2 {
		return
	}
	dst := pos[len(pos)-1]
	if !isRemoteSpec(dst.s) {
		return
	}
	for _, src := range pos[:len(pos)-1] {
		t := a.target(field{s: strings.TrimSuffix(src.s, "/"), dyn: src.dyn})
		if src.dyn {
			continue
		}
		if a.isHomeDir(t.p) || a.outsideHome(t) && !a.regenerable(t) && strings.Count(mustRel(a, t.p), "/") == 0 {
			a.add(ruleExfil)
		}
	}
}

func mustRel(a *analyzer, p string) string {
	rel, _ := a.homeRel(p)
	return rel
}

// dockerValued are docker run options that take a value.
var dockerValued = map[string]bool{
	"-v": true, "--volume": true, "-e": true, "--env": true, "-w": true, "--workdir": true, "--name": true, "-p": true,
	"--publish": true, "--mount": true, "--network": true, "--net": true, "--entrypoint": true, "-u": true, "--user": true,
	"--pid": true, "--ipc": true, "--platform": true, "-l": true, "--label": true, "--cap-add": true, "--cap-drop": true,
	"--security-opt": true, "--env-file": true, "-h": true, "--hostname": true, "--add-host": true, "--device": true,
	"--tmpfs": true, "--ulimit": true, "--restart": true, "--log-driver": true, "-m": true, "--memory": true, "--cpus": true,
	"--userns": true, "--uts": true, "--cgroupns": true, "--gpus": true, "--runtime": true, "--shm-size": true,
}

// dockerRunCommand returns the command of "docker run [options] IMAGE CMD...".
func dockerRunCommand(args []field) []field {
	i := 0
	for i < len(args) && args[i].s != "run" && args[i].s != "create" {
		i++
	}
	for i++; i < len(args); i++ {
		s := args[i].s
		if dockerValued[s] {
			i++
			continue
		}
		if strings.HasPrefix(s, "-") {
			continue
		}
		out := make([]field, len(args)-i-1)
		copy(out, args[i+1:])
		return out
	}
	return nil
}

// releaseRef reports whether a ref names a release, production or version line.
func releaseRef(name string) bool {
	for _, p := range [...]string{"release", "prod", "main", "master", "stable", "hotfix", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// authHeader reports whether args[i] is an Authorization header: a token
// sent the way its service expects, not smuggled in a URL or a body.
func authHeader(args []field, i int) bool {
	s := strings.ToLower(args[i].s)
	if i > 0 && (args[i-1].s == "-H" || args[i-1].s == "--header") {
		return strings.HasPrefix(s, "authorization:")
	}
	if i > 0 && (args[i-1].s == "-u" || args[i-1].s == "--user") {
		return true // basic authentication with the service
	}
	return strings.HasPrefix(s, "--header=authorization:") || strings.HasPrefix(s, "-hauthorization:") || strings.HasPrefix(s, "--user=")
}
