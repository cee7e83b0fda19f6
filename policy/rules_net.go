package policy

import (
	"path"
	"strings"
)

// curlValued are curl options that take a separate value.
const curlValued = "dFTHoXeuUxAbcEKrwmyYzCPQ"

var curlLongValued = " --data --data-binary --data-raw --data-urlencode --data-ascii --form --form-string " +
	"--upload-file --header --output --request --referer --user --proxy --user-agent --cookie " +
	"--cookie-jar --cert --key --cacert --capath --netrc-file --config --max-time " +
	"--connect-timeout --retry --url --json --output-dir --resolve --write-out --proxy-user " +
	"--range --limit-rate --interface --dns-servers -K "

// curl options whose value is a local file used for authentication or
// TLS, not an upload.
var curlAuthFiles = " --cert --key --cacert --capath --netrc-file --config -K -E --proxy-cert --proxy-key "

func hasOutputFile(args []field) bool {
	for i, f := range args {
		s := f.s
		switch {
		case s == "-o" || s == "--output":
			if i+1 < len(args) && args[i+1].s != "-" && args[i+1].s != "/dev/stdout" {
				return true
			}
		case s == "-O" || s == "--remote-name" || s == "--remote-name-all" || strings.HasPrefix(s, "--output="):
			return true
		case len(s) > 1 && s[0] == '-' && s[1] != '-':
			cl := s[1:]
			if i := strings.IndexAny(cl, curlValued); i >= 0 {
				if cl[i] == 'o' {
					v := cl[i+1:]
					if v == "" && i+1 < len(args) {
						v = args[i+1].s
					}
					return v != "-" && v != "/dev/stdout"
				}
				cl = cl[:i]
			}
			if strings.ContainsRune(cl, 'O') {
				return true
			}
		}
	}
	return false
}

func wgetToStdout(args []field) bool {
	for i, f := range args {
		s := f.s
		switch {
		case s == "-O" || s == "--output-document":
			return i+1 < len(args) && (args[i+1].s == "-" || args[i+1].s == "/dev/stdout")
		case s == "--output-document=-" || s == "-O-" || s == "--output-document=/dev/stdout":
			return true
		case len(s) > 2 && s[0] == '-' && s[1] != '-' && strings.Contains(s, "O"):
			rest := s[strings.IndexByte(s, 'O')+1:]
			if rest == "-" {
				return true
			}
			if rest == "" && i+1 < len(args) {
				return args[i+1].s == "-"
			}
		}
	}
	return false
}

// httpClient handles curl, wget and other HTTP clients.
func (a *analyzer) httpClient(c *call) {
	args := c.args
	var urls []field
	var outFile field
	remoteName, stdinUpload := false, false
	for i := 0; i < len(args); i++ {
		f := args[i]
		s := f.s
		if s == "" {
			continue
		}
		var val string
		hasVal := false
		switch {
		case strings.HasPrefix(s, "--"):
			name, v, eq := strings.Cut(s, "=")
			if strings.Contains(curlAuthFiles, " "+name+" ") {
				if !eq {
					i++
				}
				continue
			}
			switch name {
			case "--output", "--output-document":
				if eq {
					outFile = field{s: v}
				} else if i+1 < len(args) {
					outFile = args[i+1]
				}
			case "--remote-name", "--remote-name-all":
				remoteName = true
			case "--post-file", "--body-file", "--upload-file":
				if eq {
					val, hasVal = "@"+v, true
				} else if i+1 < len(args) {
					val, hasVal = "@"+args[i+1].s, true
					i++
				}
			}
			if !hasVal && eq {
				val, hasVal = v, true
			} else if !hasVal && strings.Contains(curlLongValued, " "+name+" ") && c.name == "curl" && i+1 < len(args) {
				i++
				val, hasVal = args[i].s, true
			}
		case len(s) > 1 && s[0] == '-':
			cl := s[1:]
			if c.name == "wget" {
				if j := strings.IndexByte(cl, 'O'); j >= 0 {
					v := cl[j+1:]
					if v == "" && i+1 < len(args) {
						i++
						v = args[i].s
					}
					outFile = field{s: v}
				}
				if j := strings.IndexByte(cl, 'P'); j >= 0 && i+1 < len(args) && cl[j+1:] == "" {
					i++
				}
				continue
			}
			j := strings.IndexAny(cl, curlValued)
			if j < 0 {
				remoteName = remoteName || strings.ContainsRune(cl, 'O')
				continue
			}
			remoteName = remoteName || strings.ContainsRune(cl[:j], 'O')
			opt := cl[j]
			v := cl[j+1:]
			if v == "" && i+1 < len(args) {
				i++
				v = args[i].s
			}
			switch opt {
			case 'o':
				outFile = field{s: v}
				continue
			case 'E', 'K':
				continue
			case 'T':
				v = "@" + v
			}
			val, hasVal = v, true
		default:
			if c.name == "http" || c.name == "https" || c.name == "xh" || c.name == "httpie" {
				if k := strings.IndexAny(s, "@<"); k >= 0 && !strings.Contains(s[:k], "/") {
					val, hasVal = s[k:], true
					break
				}
			}
			urls = append(urls, f)
			if strings.HasPrefix(s, "file://") && a.isCredential(a.target(f)) || metadataCreds(s) {
				a.add(ruleReadCreds)
			}
		}
		if hasVal {
			a.uploadValue(val)
			if val == "@-" || val == "-" || strings.HasSuffix(val, "=@-") || val == "@." {
				stdinUpload = true
			}
		}
	}
	if c.in.t&tSecret != 0 && (stdinUpload || c.name == "http" || c.name == "https" || c.name == "xh") {
		a.add(ruleExfil)
	}
	// Remember downloaded files, so that running them later is caught.
	if c.name == "wget" && outFile.s == "" {
		for _, u := range urls {
			if b := urlBase(u.s); b != "" {
				a.writeTarget(field{s: b}, wDownload, desc{t: tRemote})
			}
		}
	}
	if outFile.s != "" && outFile.s != "-" && outFile.s != "/dev/stdout" {
		a.writeTarget(outFile, wDownload, desc{t: tRemote})
	}
	if remoteName {
		for _, u := range urls {
			if b := urlBase(u.s); b != "" {
				a.writeTarget(field{s: b}, wDownload, desc{t: tRemote})
			}
		}
	}
}

// uploadValue judges a curl/wget data value such as @file or name=@file.
func (a *analyzer) uploadValue(v string) {
	i := strings.IndexAny(v, "@<")
	if i < 0 {
		return
	}
	file := v[i+1:]
	if j := strings.IndexByte(file, ';'); j >= 0 {
		file = file[:j]
	}
	if file == "" || file == "-" {
		return
	}
	if a.isSecretSource(a.target(field{s: file})) {
		a.add(ruleExfil)
	}
}

func urlBase(u string) string {
	if !strings.Contains(u, "://") {
		return ""
	}
	u = u[strings.Index(u, "://")+3:]
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	i := strings.IndexByte(u, '/')
	if i < 0 {
		return ""
	}
	b := path.Base(u[i:])
	if b == "/" || b == "." || b == "" {
		return ""
	}
	return b
}

// netClient handles raw network clients: nc, telnet, socat, openssl.
func (a *analyzer) netClient(c *call) {
	if c.name == "openssl" && (len(c.args) == 0 || c.args[0].s != "s_client") {
		a.generic(c)
		return
	}
	a.sawNet = true
	a.stageNet = true
	if c.in.t&tSecret != 0 {
		a.add(ruleExfil)
	}
	switch c.name {
	case "nc":
		for i, f := range c.args {
			s := f.s
			switch {
			case s == "-e" || s == "-c" || s == "--exec" || s == "--sh-exec" || s == "--lua-exec" ||
				strings.HasPrefix(s, "--exec=") || strings.HasPrefix(s, "--sh-exec="):
				a.add(ruleReverseShell)
				if (s == "-c" || s == "--sh-exec") && i+1 < len(c.args) {
					a.shellCode(c.args[i+1], desc{}, nil, false)
				}
			case len(s) > 1 && s[0] == '-' && s[1] != '-' && (strings.HasSuffix(s, "e") || strings.HasSuffix(s, "c")):
				a.add(ruleReverseShell)
			}
		}
	case "socat":
		execAddr, netAddr := false, false
		for _, f := range c.args {
			addr := strings.ToLower(f.s)
			kind, _, _ := strings.Cut(addr, ":")
			switch kind {
			case "exec", "system":
				execAddr = true
				cmd, _, _ := strings.Cut(f.s[len(kind)+1:], ",")
				a.shellCode(field{s: strings.Trim(cmd, `'"`)}, desc{}, nil, false)
			case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "tcp-connect", "tcp-listen", "tcp4-listen", "udp-listen",
				"openssl", "openssl-connect", "openssl-listen", "ssl", "sctp", "sctp-connect", "socks", "socks4", "socks4a", "proxy":
				netAddr = true
			}
		}
		if execAddr && netAddr {
			a.add(ruleReverseShell)
		}
	case "ztcp":
		a.add(ruleDevTCP)
	}
	for _, f := range c.args {
		if f.t&tSecret != 0 {
			a.add(ruleExfil)
		}
	}
}

// netSink handles commands that send files or text to another host.
func (a *analyzer) netSink(c *call) {
	for _, f := range c.args {
		if f.t&tSecret != 0 {
			a.add(ruleExfil)
		}
	}
	switch c.name {
	case "scp":
		var files []field
		for i := 0; i < len(c.args); i++ {
			s := c.args[i].s
			if len(s) == 2 && s[0] == '-' && strings.IndexByte("iFoPcSlJ", s[1]) >= 0 {
				i++
				continue
			}
			if strings.HasPrefix(s, "-") {
				continue
			}
			files = append(files, c.args[i])
		}
		if len(files) >= 2 {
			a.exfilCopy(files[:len(files)-1], files[len(files)-1])
			if !isRemoteSpec(files[len(files)-1].s) {
				a.writeTarget(files[len(files)-1], wCopy, desc{})
			}
		}
	case "rclone", "gsutil":
		files := nonOptions(c.args, "")
		if len(files) >= 3 {
			a.exfilCopy(files[1:len(files)-1], files[len(files)-1])
		}
		if c.name == "gsutil" {
			a.cloud(c)
		}
	case "gh":
		if pos := nonOptions(c.args, "R"); len(pos) >= 2 && pos[0].s == "repo" && pos[1].s == "delete" {
			a.add(ruleCloud)
		}
		if len(c.args) >= 2 && c.args[0].s == "gist" && c.args[1].s == "create" {
			for _, f := range nonOptions(c.args[2:], "df") {
				if f.s == "-" && c.in.t&tSecret != 0 || !f.dyn && a.isSecretSource(a.target(f)) {
					a.add(ruleExfil)
				}
			}
		}
	case "mail", "mailx", "sendmail", "mutt", "sftp", "ftp", "tftp", "lftp":
		if c.in.t&tSecret != 0 {
			a.add(ruleExfil)
		}
		for i, f := range c.args {
			if (f.s == "-a" || f.s == "-A" || f.s == "--attach") && i+1 < len(c.args) && a.isSecretSource(a.target(c.args[i+1])) {
				a.add(ruleExfil)
			}
		}
	}
}

// exfilCopy flags copying secrets to a remote destination.
func (a *analyzer) exfilCopy(srcs []field, dst field) {
	if !isRemoteSpec(dst.s) {
		return
	}
	for _, s := range srcs {
		if s.dyn || isRemoteSpec(s.s) {
			continue
		}
		if a.isSecretSource(a.target(s)) {
			a.add(ruleExfil)
		}
	}
}

// ssh runs a command on another host; that command is classified too.
func (a *analyzer) ssh(c *call) {
	if c.in.t&tSecret != 0 {
		a.add(ruleExfil)
	}
	args := c.args
	i := 0
	for ; i < len(args); i++ {
		s := args[i].s
		if s == "--" {
			i++
			break
		}
		if len(s) < 2 || s[0] != '-' {
			break
		}
		opt := s[len(s)-1]
		val := ""
		if strings.IndexByte("bcDEeFIiJLlmOopQRSWw", s[1]) >= 0 {
			opt = s[1]
			if len(s) > 2 {
				val = s[2:]
			} else if i+1 < len(args) {
				i++
				val = args[i].s
			}
		}
		if opt == 'o' {
			k, v, _ := strings.Cut(val, "=")
			if k == "" || v == "" {
				k, v, _ = strings.Cut(val, " ")
			}
			switch strings.ToLower(k) {
			case "proxycommand", "localcommand", "knownhostscommand":
				a.programOption(field{s: v})
			case "remotecommand":
				a.shellCode(field{s: v}, desc{}, nil, false)
			}
		}
	}
	if i+1 < len(args) {
		a.shellCode(joinFields(args[i+1:]), c.in, nil, false)
	}
}

// metadataCreds reports whether u asks a cloud instance metadata service
// for credentials or tokens.
func metadataCreds(u string) bool {
	host := u
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	rest := ""
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host, rest = host[:i], host[i:]
	}
	switch strings.TrimSuffix(host, ":80") {
	case "169.254.169.254", "metadata.google.internal", "metadata", "100.100.100.200", "[fd00:ec2::254]", "169.254.170.2":
	default:
		return false
	}
	r := strings.ToLower(rest)
	return strings.Contains(r, "credential") || strings.Contains(r, "token") || strings.Contains(r, "service-accounts") ||
		strings.Contains(r, "user-data") || strings.Contains(r, "meta-data") || strings.Contains(r, "computemetadata") ||
		strings.Contains(r, "identity") || strings.Contains(r, "secret") || host == "169.254.170.2"
}
