package policy

import (
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Interpreter code: what a one-liner or script runs, evaluates, decodes,
// deletes and sends; the per-language tables are in code_<language>.go.

// codeLang is what the classifier knows about one interpreter language;
// each language's table lives in its own file (code_python.go, ...).
type codeLang struct {
	shellCalls []string // functions that run a shell command
	evalCalls  []string // functions that evaluate a string as code
	join       string   // how adjacent string literals concatenate
	bareCalls  bool     // functions may be called without parentheses (perl: system "x")
}

// codeLangs maps a langKey to its table.
var codeLangs = map[string]*codeLang{
	"python": langPython, "perl": langPerl, "ruby": langRuby, "node": langNode, "php": langPHP,
	"lua": langLua, "awk": langAwk, "R": langR, "tcl": langTcl, "other": langOther,
}

// analyzeCode classifies inline interpreter code.
func (a *analyzer) analyzeCode(lang, code string) {
	a.steps += len(code) / 16
	if code == "" || len(code) > maxData || !a.step() {
		return
	}
	if a.depth >= maxDepth {
		a.add(ruleTooComplex)
		return
	}
	a.depth++
	defer func() { a.depth-- }()
	code = unbindCalls(code) // f = shutil.rmtree; f(p) is shutil.rmtree(p) (codealias.go)
	a.codeExtra(lang, code)
	key := langKey(lang)
	lits := codeLits(lang, code)
	lt := codeLangs[key]
	join := lt.join
	runShell := func(s string, dyn bool) {
		a.shellCode(field{s: a.expandHome(s), dyn: dyn || strings.Contains(s, unkS)}, desc{}, nil, false)
	}
	// guessShell judges a string that may or may not be run.
	guessShell := func(s string) {
		a.runScriptMode(strings.ReplaceAll(a.expandHome(s), unkS, "${__hs_unresolved}"), desc{}, nil, false, false)
	}
	a.builtCalls(code, lits)
	for _, name := range lt.shellCalls {
		for _, span := range callSites(code, name, lits, lt.bareCalls) {
			if builtString(code[span[0]:min(span[1], len(code))]) {
				// The command is assembled at run time (chr codes, a reversed
				// or joined string): like a hex-decoded one, it cannot be read.
				a.add(ruleDynamicCommand)
			}
			s, ok := argText(code, span, lits, join)
			if !ok {
				if strings.TrimSpace(code[span[0]:min(span[1], len(code))]) != "" {
					a.add(ruleEvalDynamic)
				}
				continue
			}
			runShell(s, strings.Contains(s, unkS))
		}
	}
	for _, l := range lits {
		if l.exec {
			runShell(l.val, false)
		}
		if key == "perl" && (strings.HasPrefix(strings.TrimSpace(l.val), "|") || strings.HasSuffix(strings.TrimSpace(l.val), "|")) {
			runShell(strings.Trim(strings.TrimSpace(l.val), "|"), false)
		}
	}
	if strings.Contains(code, "getattr(") || strings.Contains(code, "__builtins__") || strings.Contains(code, "globals()[") {
		// Reflection hides the call; judge the strings it could run.
		for _, l := range lits {
			if strings.ContainsAny(l.val, " /") {
				guessShell(l.val)
			}
		}
	}
	if key == "awk" && (strings.Contains(code, `| "`) || strings.Contains(code, `|"`) || strings.Contains(code, "getline")) {
		for _, l := range lits {
			guessShell(l.val)
		}
	}
	if lang == "osascript" && strings.Contains(code, "do shell script") {
		for _, l := range lits {
			guessShell(l.val)
		}
	}
	for _, name := range lt.evalCalls {
		for _, span := range callSites(code, name, lits, key == "perl") {
			if builtString(code[span[0]:min(span[1], len(code))]) {
				a.add(ruleDynamicCommand)
			}
			if s := concatArg(code, firstArgSpan(code, span, lits), lits); s != "" {
				a.analyzeCode(lang, strings.ReplaceAll(s, unkS, " "))
			}
		}
	}
	a.codeFileOps(key, code, lits)
	a.codeDecoded(lang, code, lits)
	a.codeHeuristics(lang, code, lits)
}

var decodeMarkers = [...]string{"b64decode", "decodebytes", "decodestring", "atob(", "base64", "decode_base64", "decode64",
	"unpack(", "fromhex", "unhexlify", "codecs.decode", "from_base64", "FromBase64String", "hex2bin", "pack(\"H", "pack('H"}

// codeDecoded decodes base64 and hex literals in code that decodes and
// runs data, and classifies what comes out.
func (a *analyzer) codeDecoded(lang, code string, lits []codeLit) {
	marked := false
	for _, m := range decodeMarkers {
		if strings.Contains(code, m) {
			marked = true
			break
		}
	}
	if !marked {
		return
	}
	for _, l := range lits {
		v := strings.TrimSpace(l.val)
		if len(v) < 8 {
			continue
		}
		var dec []byte
		if b, ok := decodeBase64(v); ok && len(v) >= 12 {
			dec = b
		} else if b, err := hex.DecodeString(v); err == nil && len(v) >= 8 {
			dec = b
		}
		if len(dec) == 0 || !utf8.Valid(dec) || !mostlyPrintable(dec) {
			continue
		}
		if hasEvalExec(code) {
			a.add(ruleObfuscated)
		}
		text := string(dec)
		a.analyzeCode(lang, text)
		a.runScriptMode(text, desc{}, nil, false, false)
	}
}

func mostlyPrintable(b []byte) bool {
	n := 0
	for _, c := range b {
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' || c == '\r' || c >= 0x80 {
			n++
		}
	}
	return n*10 >= len(b)*9
}

var (
	netConnectMarks = [...]string{"socket.socket", "socket(", "create_connection", ".connect(", "TCPSocket", "fsockopen",
		"net.connect", "net.Socket", "new Socket", "IO::Socket", "socket.tcp", "TCPClient", "/inet/tcp", "/inet/udp",
		"createConnection", "Socket.new", "stream_socket_client", "/dev/tcp/"}
	shellSpawnMarks = [...]string{"dup2", "pty.spawn", "/bin/sh", "/bin/bash", "sh -i", "cmd.exe", "subprocess", "spawn(",
		"exec(", "popen", "proc_open", "system(", "os.execute", "io.popen", "child_process", "iex", "Invoke-Expression",
		"exec ", "STDIN", "open(STDOUT", "shell_exec", "passthru", "/bin/zsh"}
	netFetchMarks = [...]string{"urlopen", "urllib", "requests.get", "requests.post", "http.get", "https.get", "fetch(",
		"LWP::", "HTTP::Tiny", "Net::HTTP", "open-uri", "URI.open", "file_get_contents(\"http", "file_get_contents('http",
		"curl_exec", "Invoke-WebRequest", "iwr ", "Invoke-RestMethod", "irm ", "DownloadString", "DownloadFile", "WebClient",
		"http.request", "httpx", "aiohttp", "socket.http", "urlretrieve", "http.client", "HTTPConnection"}
	evalExecMarks = [...]string{"exec(", "eval(", "(eval)", ",eval)", "then(eval", "Function(", "instance_eval", "iex", "Invoke-Expression",
		"system(", "os.execute", "loadstring", "exec ", "eval ", "popen", "spawn"}
	envDumpMarks = [...]string{"os.environ", "process.env", "%ENV", "ENV.to_h", "getenv()", "$_SERVER", "$_ENV", "Get-ChildItem env:"}
)

func containsAny(s string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

func hasNetFetch(code string) bool { return code != "" && containsAny(code, netFetchMarks[:]) }

func hasEvalExec(code string) bool { return containsAny(code, evalExecMarks[:]) }

// codeHeuristics looks for patterns that need no literal to be dangerous:
// reverse shells, fork bombs, remote code execution, exfiltration.
func (a *analyzer) codeHeuristics(lang, code string, lits []codeLit) {
	netConnect := containsAny(code, netConnectMarks[:])
	if netConnect {
		a.sawNet = true
	}
	if lang == "awk" && (strings.Contains(code, "/inet/tcp") || strings.Contains(code, "/inet/udp")) {
		a.add(ruleReverseShell)
	}
	if netConnect && containsAny(code, shellSpawnMarks[:]) {
		a.add(ruleReverseShell)
	}
	if hasWord(code, "fork") && (strings.Contains(code, "while") || strings.Contains(code, "loop") ||
		strings.Contains(code, "for(;;)") || strings.Contains(code, "for (;;)") || strings.Contains(code, "until")) {
		a.add(ruleForkBomb)
	}
	if codeKillsAll(code) {
		a.add(ruleKillAll)
	}
	fetch := hasNetFetch(code)
	if fetch && hasEvalExec(code) {
		a.add(rulePipeShell)
	}
	if hasGateEnv(code) && (strings.Contains(code, "environ") || strings.Contains(code, "putenv") || strings.Contains(code, "ENV") ||
		strings.Contains(code, "process.env") || strings.Contains(code, "setenv") || strings.Contains(code, "Env")) {
		a.add(ruleGateEnv)
	}
	secret := false
	for _, l := range lits {
		if !looksLikePath(l.val) {
			continue
		}
		t := a.target(lit(a.expandHome(l.val)))
		if a.isProtected(t) && codeWrites(code) {
			a.add(ruleGateConfigWrite)
		}
		if a.isCredential(t) && codeReads(code) {
			a.add(ruleReadCreds)
			secret = true
		} else if a.isSecretSource(t) {
			secret = true
		}
	}
	if (netConnect || fetch) && (secret || containsAny(code, envDumpMarks[:]) && (strings.Contains(code, "post") || strings.Contains(code, "send") || strings.Contains(code, "POST"))) {
		a.add(ruleExfil)
	}
}

// codeReads reports whether code opens or reads files.
func codeReads(code string) bool {
	return containsAny(code, readMarks[:])
}

var readMarks = [...]string{"open(", "read", "Read", "load", "slurp", "get_contents", "copy", "send", "cat ", "upload", "<"}

func codeWrites(code string) bool {
	for _, m := range [...]string{"'w'", `"w"`, "'a'", `"a"`, "'wb'", `"wb"`, "write", "append", "put_contents", "'>", `">`,
		"unlink", "remove", "rename", "truncate", "rmtree", "copy", "replace", "chmod", "dump("} {
		if strings.Contains(code, m) {
			return true
		}
	}
	return false
}

func hasWord(s, w string) bool {
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(w)
		if (i == 0 || !isIdent(s[i-1])) && (end >= len(s) || !isIdent(s[end])) {
			return true
		}
		off = end
	}
}

// builtStringMarks are the ways code assembles a string at run time from
// pieces no reader sees whole: character codes, reversal, joins, packing.
var builtStringMarks = [...]string{
	"chr(", "join(", "[::-1]", "[::", "reversed(", "fromCharCode", ".reverse", "pack(", "%c", "bytes(",
	"bytearray(", "map(", ".tr(", "rot13", ".translate(", "codePointAt", "String.new(", ".chr", "sprintf(",
}

// builtString reports whether the text of a call's arguments builds its
// string at run time.
func builtString(args string) bool {
	return containsAny(args, builtStringMarks[:])
}

// reflectMarks look a function up by a name given as a string.
var reflectMarks = [...]string{
	"getattr(", "__import__(", "import_module(", "__builtins__", "globals()[", "vars(", ".__dict__[",
	".send(", ".public_send(", ".method(", "Object.const_get", "Reflect.", "process.binding(",
	"process[", "require(", "&{", "->can(", "call_user_func", "$_GET",
}

// builtCalls flags a call whose function or module is looked up by a name
// that is itself assembled ("o"+"s", chr codes, slices): the reader cannot
// see what runs.
func (a *analyzer) builtCalls(code string, lits []codeLit) {
	for _, m := range reflectMarks {
		for off := 0; ; {
			i := strings.Index(code[off:], m)
			if i < 0 {
				break
			}
			i += off
			off = i + len(m)
			end := matchParen(code, i+len(m)-1, lits)
			if end < 0 || code[i+len(m)-1] != '(' {
				end = min(len(code), i+len(m)+64)
			}
			arg := code[i+len(m) : max(end, i+len(m))]
			if builtString(arg) || concatLits(arg) {
				a.add(ruleDynamicCommand)
				return
			}
		}
	}
}

// concatLits reports whether text joins string literals with + or . ("o"+"s").
func concatLits(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != '+' && text[i] != '.' {
			continue
		}
		l := strings.TrimRight(text[:i], " ")
		r := strings.TrimLeft(text[i+1:], " ")
		if l != "" && r != "" && strings.ContainsRune(`"'`, rune(l[len(l)-1])) && strings.ContainsRune(`"'`, rune(r[0])) {
			return true
		}
	}
	return false
}
