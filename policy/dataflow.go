package policy

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"compress/zlib"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"io"
	"path"
	"strconv"
	"strings"
)

// maxData bounds decoded or generated text.
const maxData = 256 << 10

// produce computes, without recording findings, what argv prints when it
// reads in. It follows data through decoders so that the text a shell
// finally runs can be classified.
func (a *analyzer) produce(argv []field, in desc) desc {
	for hops := 0; hops < 8 && len(argv) > 0; hops++ {
		if argv[0].dyn {
			return desc{t: in.t | argv[0].t}
		}
		name := normName(argv[0].s)
		if sp := wrapSpecFor(name); sp != nil {
			rest := peelOptions(argv[1:], sp.short, sp.long)
			if len(rest) <= sp.skip {
				return desc{t: in.t}
			}
			argv = rest[sp.skip:]
			continue
		}
		switch name {
		case "sudo":
			argv = peelOptions(argv[1:], "ugCDprtTU", "user group prompt chdir ")
			continue
		case "command", "exec", "busybox", "nohup":
			if len(argv) > 1 && (argv[1].s == "-v" || argv[1].s == "-V") {
				return a.which(argv[2:])
			}
			argv = peelOptions(argv[1:], "a", "")
			continue
		case "env":
			rest := argv[1:]
			for len(rest) > 0 && (strings.Contains(rest[0].s, "=") || strings.HasPrefix(rest[0].s, "-")) {
				if rest[0].s == "-u" || rest[0].s == "-C" {
					rest = rest[1:]
				}
				if len(rest) > 0 {
					rest = rest[1:]
				}
			}
			if len(rest) == 0 {
				return desc{t: tSecret}
			}
			argv = rest
			continue
		}
		return a.produce1(name, argv[1:], in)
	}
	return desc{t: in.t}
}

func (a *analyzer) produce1(name string, args []field, in desc) desc {
	var argT taint
	for _, f := range args {
		argT |= f.t
		if f.proc != nil {
			argT |= f.proc.t // <(curl …): what the process substitution prints is read like a file
		}
	}
	switch name {
	case "xargs":
		// xargs prints what the command it runs prints.
		rest := peelOptions(args, "aIdnPELs", "arg-file delimiter max-args max-procs max-lines max-chars eof replace ")
		if len(rest) == 0 {
			return desc{t: in.t}
		}
		out := a.produce(rest, desc{t: in.t})
		out.t |= in.t
		out.known = false
		return out
	case "echo":
		return echoOut(args)
	case "printf":
		if len(args) > 0 && args[0].s == "-v" {
			return desc{known: true}
		}
		return printfOut(args)
	case "true", "false", ":", "cd", "unset", "alias", "mkdir", "touch", "chmod", "chown", "rm", "cp", "mv", "ln":
		return desc{known: true}
	case "yes":
		text := "y"
		if len(args) > 0 {
			text = joinFields(args).s
		}
		return desc{text: text + "\n", known: true, t: tInfinite}
	case "head":
		d := in
		if files := nonOptions(args, "nc"); len(files) > 0 {
			d = a.produce1("cat", files[:1], in)
		}
		d.known = false
		if d.t&tInfinite != 0 {
			d.t &^= tInfinite
			for i, f := range args {
				v := strings.TrimPrefix(f.s, "--bytes=")
				if f.s == "-c" && i+1 < len(args) {
					v = args[i+1].s
				} else if strings.HasPrefix(f.s, "-c") && len(f.s) > 2 {
					v = f.s[2:]
				}
				if n, ok := parseSize(v); ok && n >= hugeSize {
					d.t |= tInfinite
				}
			}
		}
		return d
	case "cat", "tac", "more", "less", "tail", "nl", "zcat", "gzcat", "bzcat":
		valued := ""
		if name == "head" || name == "tail" {
			valued = "nc"
		}
		files := nonOptions(args, valued)
		if len(files) == 0 {
			return a.decompressIf(name, in)
		}
		out := desc{known: true}
		for _, f := range files {
			if isEndless(f.s) {
				return desc{t: tInfinite}
			}
			if f.s == "/dev/null" {
				continue // contributes nothing
			}
			out = concatDesc(out, a.fileContent(f))
		}
		if name == "head" || name == "tail" || name == "tac" || name == "nl" {
			out.known = false
		}
		return a.decompressIf(name, out)
	case "tee", "iconv", "dos2unix", "unix2dos", "cut", "sort", "uniq", "grep", "egrep", "fgrep", "fold", "column", "jq", "awk", "sponge", "pv", "buffer",
		"diff", "sdiff", "comm", "paste", "join":
		d := desc{t: in.t | argT}
		if (name == "tee" || name == "iconv" || name == "dos2unix" || name == "pv" || name == "sponge") && in.known {
			d.text, d.known = in.text, true
		}
		return a.secretArgs(args, d)
	case "base64", "base32", "basenc":
		return a.decodeCmd(name, args, in)
	case "xxd":
		return a.xxdCmd(args, in)
	case "rev":
		src := a.stdinOrFile(args, in)
		if !src.known {
			return desc{t: src.t | tDecoded}
		}
		lines := strings.Split(src.text, "\n")
		for i, l := range lines {
			r := []rune(l)
			for x, y := 0, len(r)-1; x < y; x, y = x+1, y-1 {
				r[x], r[y] = r[y], r[x]
			}
			lines[i] = string(r)
		}
		return desc{text: strings.Join(lines, "\n"), known: true, t: src.t | tDecoded}
	case "tr":
		return trCmd(args, in)
	case "gunzip", "gzip", "bzip2", "bunzip2", "zlib-flate", "xz", "unxz", "zstd", "unzstd", "uncompress":
		return a.decompressCmd(name, args, in)
	case "openssl":
		return a.opensslCmd(args, in)
	case "sed":
		return sedCmd(args, in)
	case "which", "type", "whereis":
		return a.which(args)
	case "pwd":
		return desc{text: a.pwd() + "\n", known: !a.cwdDyn}
	case "mktemp":
		return desc{text: "/tmp/tmp." + unkS + "\n", known: true}
	case "basename":
		if f := nonOptions(args, ""); len(f) > 0 && !f[0].dyn {
			return desc{text: path.Base(f[0].s) + "\n", known: true}
		}
	case "dirname":
		if f := nonOptions(args, ""); len(f) > 0 && !f[0].dyn {
			return desc{text: path.Dir(f[0].s) + "\n", known: true}
		}
	case "realpath", "readlink":
		if f := nonOptions(args, ""); len(f) > 0 && !f[0].dyn {
			return desc{text: a.target(f[0]).p + "\n", known: true}
		}
	case "git":
		if len(args) >= 2 && args[0].s == "rev-parse" && args[1].s == "--show-toplevel" {
			return desc{text: a.pwd() + "\n", known: !a.cwdDyn}
		}
		return desc{}
	case "curl":
		if hasOutputFile(args) {
			return desc{known: true}
		}
		return desc{t: tRemote}
	case "wget":
		if wgetToStdout(args) {
			return desc{t: tRemote}
		}
		return desc{known: true}
	case "http", "https", "xh", "fetch", "lwp-request", "GET", "POST", "nc", "telnet", "socat", "ssh", "dig", "nslookup", "host", "drill", "gh", "aria2c":
		return desc{t: tRemote}
	case "printenv", "history", "fc":
		return desc{t: tSecret}
	case "set", "declare", "typeset", "export":
		// Without arguments these print every variable.
		if len(args) == 0 || args[0].s == "-p" {
			return desc{t: tSecret}
		}
		return desc{known: true}
	case "python", "perl", "ruby", "node", "php", "lua", "pwsh", "powershell", "deno", "bun":
		code := interpCode(name, args)
		if hasNetFetch(code) {
			return desc{t: tRemote | in.t}
		}
		return a.secretArgs(args, desc{t: in.t})
	case "find":
		return findOut(a, args)
	case "ssh-agent", "gpg-agent", "keychain", "pyenv", "rbenv", "nodenv", "goenv", "jenv", "plenv", "direnv", "conda", "mamba",
		"micromamba", "brew", "starship", "zoxide", "fnm", "mise", "rtx", "asdf", "opam", "minikube", "docker-machine", "dircolors",
		"thefuck", "register-python-argcomplete", "luarocks", "resize", "tset", "dbus-launch", "aws-vault", "pipenv", "poetry", "kind":
		return desc{t: tInit}
	case "tar", "bsdtar", "zip", "7z", "7za":
		// An archive of the home directory or a document folder in it
		// carries everything in them.
		for _, f := range args {
			if f.dyn || strings.HasPrefix(f.s, "-") {
				continue
			}
			t := a.target(f)
			if a.isHomeDir(t.p) || a.isCredential(t) || a.isSSHDir(t.p) || a.outsideHome(t) && !a.regenerable(t) && !strings.Contains(path.Base(t.p), ".") {
				return desc{t: tSecret}
			}
		}
		return desc{}
	case "findmnt", "df", "lsblk", "blkid", "mount":
		return desc{t: tDevice}
	case "ps":
		for _, f := range args {
			if strings.Contains(f.s, "ppid") {
				return desc{t: tSupervisor}
			}
		}
		return desc{t: tPidList}
	case "pgrep", "pidof":
		for _, f := range nonOptions(args, "ugGPst") {
			if namesSupervisor(f.s) {
				return desc{t: tSupervisor}
			}
			if n := strings.Trim(f.s, "^$"); criticalProcs[n] || n == "." || n == ".*" {
				return desc{t: tCritical}
			}
		}
		return desc{}
	case "ls":
		for _, f := range nonOptions(args, "IwT") {
			if !f.dyn {
				// ls prints names relative to its argument; "{}" stands for each.
				return desc{hint: strings.TrimSuffix(f.s, "/") + "/{}"}
			}
		}
		return desc{}
	case "stat", "wc", "du", "date", "whoami", "id", "hostname", "uname", "uptime", "nproc", "seq", "sleep":
		return desc{}
	}
	if isPSFetcher(name) {
		return desc{t: tRemote}
	}
	for _, f := range args {
		switch f.s {
		case "init", "shellenv", "hook", "activate", "completion", "completions", "env":
			return desc{t: in.t | tInit}
		}
	}
	return a.secretArgs(args, desc{t: in.t})
}

// secretArgs adds tSecret when a command reads a secret file.
func (a *analyzer) secretArgs(args []field, d desc) desc {
	for _, f := range args {
		if f.dyn || f.s == "" || f.s[0] == '-' && !strings.Contains(f.s, "=") {
			continue
		}
		s := f.s
		if i := strings.IndexByte(s, '='); i >= 0 && strings.HasPrefix(s, "-") || strings.HasPrefix(s, "if=") {
			s = s[i+1:]
		}
		if a.isSecretSource(a.target(field{s: s})) {
			d.t |= tSecret
		}
	}
	return d
}

func nonOptions(args []field, valued string) []field {
	var out []field
	for i := 0; i < len(args); i++ {
		s := args[i].s
		if len(s) > 1 && s[0] == '-' {
			if len(s) == 2 && strings.IndexByte(valued, s[1]) >= 0 {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

func (a *analyzer) fileContent(f field) desc {
	if f.proc != nil {
		return *f.proc
	}
	if f.dyn {
		return desc{t: f.t}
	}
	if f.s == "-" {
		return desc{}
	}
	t := a.target(f)
	if d, ok := a.files[t.p]; ok && (a.line[t.p] || !a.blind) {
		return d
	}
	var tt taint
	if isDevNet(f.s) {
		tt |= tRemote
	}
	if a.isSecretSource(t) {
		tt |= tSecret
	}
	if a.blind && !a.line[t.p] {
		// Written, perhaps, by an earlier command whose file names are not known.
		return desc{t: tt, unseen: true}
	}
	return desc{t: tt, src: t.p}
}

func (a *analyzer) stdinOrFile(args []field, in desc) desc {
	if files := nonOptions(args, "w"); len(files) > 0 {
		return a.fileContent(files[0])
	}
	return in
}

func (a *analyzer) which(args []field) desc {
	for _, f := range args {
		if !strings.HasPrefix(f.s, "-") && !f.dyn {
			return desc{text: "/usr/bin/" + cmdBase(f.s) + "\n", known: true}
		}
	}
	return desc{}
}

func echoOut(args []field) desc {
	escapes := false
	newline := true
	for len(args) > 0 && len(args[0].s) > 1 && args[0].s[0] == '-' && strings.Trim(args[0].s[1:], "neE") == "" {
		if strings.Contains(args[0].s, "e") {
			escapes = true
		}
		if strings.Contains(args[0].s, "n") {
			newline = false
		}
		args = args[1:]
	}
	f := joinFields(args)
	d := desc{text: f.s, known: true, t: f.t}
	// dash's echo always interprets escapes; treat them as decoding.
	if escapes || strings.Contains(d.text, `\x`) || strings.Contains(d.text, `\0`) {
		if dec := printfEscapes(d.text); dec != d.text {
			d.text = dec
			d.t |= tDecoded
		}
	}
	if newline {
		d.text += "\n"
	}
	return d
}

func printfOut(args []field) desc {
	if len(args) > 0 && args[0].s == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return desc{known: true}
	}
	format := args[0]
	rest := args[1:]
	var t taint
	for _, f := range args {
		t |= f.t
	}
	var sb strings.Builder
	decoded := false
	for iter := 0; iter < 64; iter++ {
		used := 0
		s := format.s
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '\\' && i+1 < len(s):
				j := escapeEnd(s, i)
				sb.WriteString(printfEscapes(s[i:j]))
				decoded = decoded || s[i+1] == 'x' || s[i+1] >= '0' && s[i+1] <= '7' || s[i+1] == 'u'
				i = j - 1
			case c == '%' && i+1 < len(s):
				j := i + 1
				for j < len(s) && strings.IndexByte("-+ #0123456789.", s[j]) >= 0 {
					j++
				}
				if j >= len(s) {
					sb.WriteString(s[i:])
					i = len(s)
					break
				}
				verb := s[j]
				i = j
				if verb == '%' {
					sb.WriteByte('%')
					break
				}
				arg := ""
				if used < len(rest) {
					arg = rest[used].s
				}
				used++
				switch verb {
				case 'b':
					dec := printfEscapes(arg)
					decoded = decoded || dec != arg
					sb.WriteString(dec)
				case 'c':
					if arg != "" {
						sb.WriteString(arg[:1])
					}
				case 'd', 'i', 'u':
					n, _ := strconv.Atoi(arg)
					sb.WriteString(strconv.Itoa(n))
				case 'x', 'X', 'o':
					n, _ := strconv.Atoi(arg)
					base := 16
					if verb == 'o' {
						base = 8
					}
					sb.WriteString(strconv.FormatInt(int64(n), base))
				default:
					sb.WriteString(arg)
				}
			default:
				sb.WriteByte(c)
			}
			if sb.Len() > maxData {
				return desc{t: t}
			}
		}
		if used == 0 || used >= len(rest) {
			break
		}
		rest = rest[used:]
	}
	d := desc{text: sb.String(), known: true, t: t}
	if decoded {
		d.t |= tDecoded
	}
	return d
}

func escapeEnd(s string, i int) int {
	j := i + 2
	switch c := s[i+1]; {
	case c == 'x':
		for j < len(s) && j < i+4 && isHex(s[j]) {
			j++
		}
	case c == 'u':
		for j < len(s) && j < i+6 && isHex(s[j]) {
			j++
		}
	case c >= '0' && c <= '7':
		for j < len(s) && j < i+5 && s[j] >= '0' && s[j] <= '7' {
			j++
		}
	}
	return j
}

// printfEscapes interprets backslash escapes as printf %b and echo -e do.
func printfEscapes(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	// \0NNN is octal in echo and %b; ansiC reads \NNN.
	s = strings.ReplaceAll(s, `\0`, `\`)
	return ansiC(s)
}

func (a *analyzer) decodeCmd(name string, args []field, in desc) desc {
	decode := false
	for _, f := range args {
		s := f.s
		if s == "--decode" || (len(s) > 1 && s[0] == '-' && s[1] != '-' && strings.ContainsAny(s[1:], "dD")) {
			decode = true
		}
	}
	src := a.stdinOrFile(args, in)
	if !decode {
		return desc{t: src.t}
	}
	if !src.known {
		return desc{t: src.t | tDecoded}
	}
	var out []byte
	var ok bool
	if name == "base32" {
		out, ok = decodeBase32(src.text)
	} else {
		out, ok = decodeBase64(src.text)
	}
	if !ok {
		return desc{t: src.t | tDecoded}
	}
	return desc{text: string(out), known: true, t: src.t | tDecoded}
}

func stripSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' {
			return -1
		}
		return r
	}, s)
}

func decodeBase64(s string) ([]byte, bool) {
	s = stripSpace(s)
	if s == "" || len(s) > 4*maxData/3 {
		return nil, false
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

func decodeBase32(s string) ([]byte, bool) {
	s = stripSpace(s)
	if b, err := base32.StdEncoding.DecodeString(s); err == nil {
		return b, true
	}
	return nil, false
}

func (a *analyzer) xxdCmd(args []field, in desc) desc {
	reverse, plain := false, false
	for _, f := range args {
		if strings.HasPrefix(f.s, "-") {
			reverse = reverse || strings.Contains(f.s, "r")
			plain = plain || strings.Contains(f.s, "p") || f.s == "-ps" || f.s == "-plain"
		}
	}
	src := a.stdinOrFile(args, in)
	if !reverse {
		return desc{t: src.t}
	}
	if !src.known {
		return desc{t: src.t | tDecoded}
	}
	text := src.text
	if !plain {
		var sb strings.Builder
		for _, line := range strings.Split(text, "\n") {
			if _, rest, ok := strings.Cut(line, ": "); ok {
				if i := strings.Index(rest, "  "); i >= 0 {
					rest = rest[:i]
				}
				sb.WriteString(rest)
			} else {
				sb.WriteString(line)
			}
		}
		text = sb.String()
	}
	b, err := hex.DecodeString(stripSpace(text))
	if err != nil {
		return desc{t: src.t | tDecoded}
	}
	return desc{text: string(b), known: true, t: src.t | tDecoded}
}

func trCmd(args []field, in desc) desc {
	del := false
	var sets []string
	for _, f := range args {
		if strings.HasPrefix(f.s, "-") && len(f.s) > 1 {
			if strings.Contains(f.s, "c") || strings.Contains(f.s, "C") {
				return desc{t: in.t | tDecoded}
			}
			del = del || strings.Contains(f.s, "d")
			continue
		}
		sets = append(sets, f.s)
	}
	if !in.known || len(sets) == 0 {
		return desc{t: in.t | tDecoded}
	}
	from := trSet(sets[0])
	if del {
		out := strings.Map(func(r rune) rune {
			if strings.ContainsRune(string(from), r) {
				return -1
			}
			return r
		}, in.text)
		return desc{text: out, known: true, t: in.t}
	}
	if len(sets) < 2 {
		return desc{t: in.t}
	}
	to := trSet(sets[1])
	if len(to) == 0 {
		return desc{t: in.t | tDecoded}
	}
	m := map[rune]rune{}
	for i, r := range from {
		if i < len(to) {
			m[r] = to[i]
		} else {
			m[r] = to[len(to)-1]
		}
	}
	out := strings.Map(func(r rune) rune {
		if x, ok := m[r]; ok {
			return x
		}
		return r
	}, in.text)
	return desc{text: out, known: true, t: in.t | tDecoded}
}

func trSet(s string) []rune {
	s = strings.NewReplacer("[:upper:]", "A-Z", "[:lower:]", "a-z", "[:digit:]", "0-9").Replace(s)
	s = printfEscapes(s)
	r := []rune(s)
	var out []rune
	for i := 0; i < len(r); i++ {
		if i+2 < len(r) && r[i+1] == '-' && r[i+2] >= r[i] && r[i+2]-r[i] < 1024 {
			for c := r[i]; c <= r[i+2]; c++ {
				out = append(out, c)
			}
			i += 2
			continue
		}
		out = append(out, r[i])
	}
	return out
}

func (a *analyzer) decompressIf(name string, d desc) desc {
	switch name {
	case "zcat", "gzcat", "bzcat":
		return decompress(name, d)
	}
	return d
}

func (a *analyzer) decompressCmd(name string, args []field, in desc) desc {
	decompressing := strings.HasPrefix(name, "gun") || strings.HasPrefix(name, "bun") || strings.HasPrefix(name, "un") || name == "zlib-flate"
	for _, f := range args {
		if strings.HasPrefix(f.s, "-") && (strings.Contains(f.s, "d") || f.s == "-uncompress") {
			decompressing = true
		}
	}
	src := a.stdinOrFile(args, in)
	if !decompressing {
		return desc{t: src.t}
	}
	return decompress(name, src)
}

func decompress(name string, src desc) desc {
	if !src.known {
		return desc{t: src.t | tDecoded}
	}
	var r io.Reader
	var err error
	br := bytes.NewReader([]byte(src.text))
	switch {
	case strings.Contains(name, "bz"):
		r = bzip2.NewReader(br)
	case name == "zlib-flate":
		r, err = zlib.NewReader(br)
	case strings.Contains(name, "z") && !strings.Contains(name, "xz") && !strings.Contains(name, "zst"):
		r, err = gzip.NewReader(br)
	default:
		return desc{t: src.t | tDecoded}
	}
	if err != nil {
		return desc{t: src.t | tDecoded}
	}
	b, err := io.ReadAll(io.LimitReader(r, maxData))
	if err != nil && len(b) == 0 {
		return desc{t: src.t | tDecoded}
	}
	return desc{text: string(b), known: true, t: src.t | tDecoded}
}

func (a *analyzer) opensslCmd(args []field, in desc) desc {
	if len(args) == 0 {
		return desc{}
	}
	switch args[0].s {
	case "s_client":
		return desc{t: tRemote}
	case "base64", "enc":
		dec, b64 := false, args[0].s == "base64"
		for _, f := range args[1:] {
			switch f.s {
			case "-d", "-D":
				dec = true
			case "-a", "-A", "-base64":
				b64 = true
			}
		}
		if !dec || !b64 {
			return desc{t: in.t}
		}
		return a.decodeCmd("base64", []field{lit("-d")}, in)
	case "zlib":
		return decompress("zlib-flate", in)
	}
	return a.secretArgs(args, desc{t: in.t})
}

// sedCmd applies a single literal s/// command to known text.
func sedCmd(args []field, in desc) desc {
	var script string
	for i := 0; i < len(args); i++ {
		s := args[i].s
		switch {
		case s == "-e" && i+1 < len(args):
			script = args[i+1].s
			i++
		case strings.HasPrefix(s, "-"):
		case script == "":
			script = s
		}
	}
	if !in.known || len(script) < 4 || script[0] != 's' {
		return desc{t: in.t}
	}
	sep := script[1:2]
	parts := strings.Split(script[2:], sep)
	if len(parts) < 2 || strings.ContainsAny(parts[0], `.*[]^$\+?(){}|`) {
		return desc{t: in.t | tDecoded}
	}
	n := 1
	if len(parts) > 2 && strings.Contains(parts[2], "g") {
		n = -1
	}
	return desc{text: strings.Replace(in.text, parts[0], parts[1], n), known: true, t: in.t | tDecoded}
}

func findOut(a *analyzer, args []field) desc {
	roots, filtered, acts := findParse(args)
	if acts || len(roots) == 0 {
		return desc{}
	}
	h := roots[0].s
	if filtered {
		h = strings.TrimSuffix(h, "/") + "/{}"
	}
	return desc{hint: h}
}
