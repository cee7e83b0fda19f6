package policy

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// Session-aware classification: what the gate knows about the session a command runs in
// (its directory, its variables, the files it can read there) taken into the analysis, so
// that a command that looks harmless on its own text is judged where it really runs.

// MaxScriptRead bounds how much of one file the classifier reads to check what it runs.
const MaxScriptRead = 256 << 10

// maxSessionReads bounds the files one command may make the classifier read.
const maxSessionReads = 32

// ErrTooLarge is what a Context.ReadFile returns for a file over MaxScriptRead bytes.
var ErrTooLarge = errors.New("larger than the size the gate reads")

// Context is the session state a command is classified in.
type Context struct {
	// Dir is the absolute directory the command starts in (the session's directory after
	// the previous command, or the command's own Dir). "" means unknown: relative paths are
	// then never taken to be inside the working tree.
	Dir string
	// WorkDir is the session's working tree when the Classifier has none configured.
	WorkDir string
	// Env is the session's exported environment with the command's own variables on top.
	Env map[string]string
	// CmdEnv holds the variables set for this command only (CLI --env, Command.Env).
	CmdEnv map[string]string
	// BasePath is the PATH the session started with; directories added to it since are
	// searched for programs that shadow the usual ones. "" means the usual system PATH.
	BasePath string
	// ReadFile reads a file in the session (a relative path is relative to the session's
	// directory). It returns an error matching fs.ErrNotExist for a missing file and
	// ErrTooLarge past MaxScriptRead bytes. Nil means files cannot be read, so a command that
	// runs one needs approval.
	ReadFile func(path string) ([]byte, error)
	// Host says the command runs directly on the host machine, beside its other containers
	// and processes, rather than inside a container or machine of its own (the local
	// backend). Entering a container or a namespace from there (docker, podman or kubectl
	// exec, nsenter) reaches past the sandbox, so it needs approval; inside a container the
	// same words reach only what the container itself can.
	Host bool
}

// Session-level findings. Their descriptions are stable allowlist keys; the specifics (which
// file, which error) go in Analysis.Notes.
var (
	findingUnreadable = Finding{Rule: "unreadable-script", Verdict: VerdictDangerous,
		Description: "running a file whose contents could not be read to check them"}
	findingShadowBinary = Finding{Rule: "path-shadowed-program", Verdict: VerdictDangerous,
		Description: "running a program from a directory added to PATH"}
	findingPreload = Finding{Rule: "session-preload", Verdict: VerdictDangerous,
		Description: "the session preloads a library into every program (LD_PRELOAD)"}
)

// sessionVars are the variables whose change alters what later commands run.
var sessionVars = map[string]bool{
	"PATH": true, "BASH_ENV": true, "ENV": true, "LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
	"PROMPT_COMMAND": true, "PS0": true, "PS1": true, "PS4": true, "SHELLOPTS": true, "BASHOPTS": true,
	"DYLD_INSERT_LIBRARIES": true, "PYTHONSTARTUP": true, "PYTHONPATH": true, "NODE_OPTIONS": true, "PERL5OPT": true,
	"RUBYOPT": true,
}

// sessionVarRisky reports whether setting name to val changes what later commands run in a
// way that needs approval. Search-path lists (PATH, PYTHONPATH, LD_LIBRARY_PATH) do only when
// they gain an entry in a directory anybody can write (/tmp), or PATH a relative one: a program later
// found in another added directory is read and judged when it runs (shadowed). NODE_OPTIONS
// does only when it loads code (--require, --import, --loader), PROMPT_COMMAND only when its
// text is not known (a known one is judged as the command it is). The others are hooks that
// run code by themselves and always do.
func sessionVarRisky(name string, val field) bool {
	if !sessionVars[name] {
		return false
	}
	switch name {
	case "PATH", "PYTHONPATH", "LD_LIBRARY_PATH":
		for _, e := range strings.Split(val.s, ":") {
			switch {
			case strings.Contains(e, unkS):
				// an unresolved part ($PATH itself, $(go env GOPATH)/bin)
			case e == "" || !strings.HasPrefix(e, "/"):
				// ".", "bin": programs found relative to wherever a later command runs
				// (PYTHONPATH=. for a test run is routine: modules, not programs).
				if name == "PATH" {
					return true
				}
			case tempDir(path.Clean(e)):
				return true
			case name == "PATH" && !homeOrSystemDir(path.Clean(e)):
				// a directory outside the system's and the user's own (a mount, a
				// scratch tree): what it holds can shadow any program
				return true
			}
		}
		return false
	case "PROMPT_COMMAND":
		return val.dyn // its text is judged as the command it is (checkEnv)
	case "NODE_OPTIONS":
		for _, w := range strings.Fields(val.s) {
			k, _, _ := strings.Cut(w, "=")
			switch k {
			case "-r", "--require", "--import", "--loader", "--experimental-loader", "--inspect", "--inspect-brk":
				return true
			}
		}
		return val.dyn
	}
	return true
}

// homeOrSystemDir reports whether p is a system program directory or inside a user's home.
func homeOrSystemDir(p string) bool {
	for _, d := range [...]string{"/usr", "/bin", "/sbin", "/opt", "/nix", "/snap", "/home", "/root", "/Users", "/Library", "/Applications"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// tempDir reports whether p is in a directory every user can write.
func tempDir(p string) bool {
	for _, d := range [...]string{"/tmp", "/var/tmp", "/dev/shm", "/private/tmp"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// IsSessionVar reports whether setting name changes what later commands run.
func IsSessionVar(name string) bool { return sessionVars[name] }

// interpreterLangs maps a normalised command name to the language of the code it runs. It is
// the one list both the classifier's analysis and the tools.code_execution switch use.
var interpreterLangs = map[string]string{
	"python": "python", "ipython": "python", "perl": "perl", "ruby": "ruby", "irb": "ruby", "php": "php",
	"lua": "lua", "node": "node", "deno": "node", "bun": "node", "Rscript": "r", "R": "r", "julia": "julia",
	"pwsh": "pwsh", "powershell": "pwsh", "tclsh": "tcl", "expect": "tcl", "jshell": "java", "osascript": "osascript",
	"awk": "awk", "guile": "scheme", "racket": "scheme", "ghci": "haskell", "runghc": "haskell", "scala": "scala",
	"groovy": "groovy", "kotlin": "kotlin", "elixir": "elixir", "erl": "erlang", "escript": "erlang",
}

// IsInterpreter reports whether the command name (a path or a bare name) runs code in a
// language other than the shell's; tools.code_execution applies to it.
func IsInterpreter(name string) bool {
	n := normName(name)
	if n == "awk" {
		return false // awk is a text tool first; its code is still analysed
	}
	_, ok := interpreterLangs[n]
	return ok
}

// ranLimit bounds the program names one analysis keeps.
const ranLimit = 256

// session is the per-call state of a session-aware analysis.
type session struct {
	ctx   Context
	wants map[string]string // path → "sh", "exec", "data" or a language
	disk  map[string]desc   // the files read so far, as they were before the command line
	notes []string
	extra []Finding
}

// want records that the command runs or reads the file t with kind.
func (a *analyzer) want(t target, kind string) {
	if a.sess == nil || t.dyn || t.glob {
		return
	}
	if a.sess.wants == nil {
		a.sess.wants = map[string]string{}
	}
	key := t.p
	if t.cwdUnknown {
		key = "\x00" + t.p // cannot be read: the directory is unknown
	}
	if _, ok := a.sess.wants[key]; !ok {
		a.sess.wants[key] = kind
	}
}

// noteRun records the programs a command runs, after wrappers.
func (a *analyzer) noteRun(name string) {
	if len(a.ran) < ranLimit {
		a.ran = append(a.ran, name)
	}
}

// noteWrite records a file the command writes.
func (a *analyzer) noteWrite(f field) {
	if a.sess == nil || f.s == "" || f.proc != nil || strings.HasPrefix(f.s, "/dev/") || len(a.wrote) >= ranLimit {
		return
	}
	a.wrote = append(a.wrote, f.s)
}

// ClassifyIn classifies command as it would run in the session described by sc: relative
// paths and globs resolve against sc.Dir, the session's variables are known, and the files
// the command runs (sh FILE, . FILE, ./FILE, python3 FILE, xargs < FILE, a program found on
// a changed PATH) are read through sc.ReadFile and analysed as well; the strongest verdict
// wins.
func (c *Classifier) ClassifyIn(sc Context, command string) Analysis {
	cl := c.withWorkDir(sc)
	files := map[string]desc{}
	var execs map[string]string // exec-kind files with a non-shell interpreter: path → lang
	unreadable := map[string]string{}
	reads := 0
	var a *analyzer
	for pass := 0; pass < 4; pass++ {
		a = cl.sessionAnalyzer(sc, files)
		a.sessionWalk(command, files, execs, unreadable, &reads)
		if !readWanted(sc, a.sess.wants, files, &execs, unreadable, &reads) {
			break
		}
	}
	res := a.result(command)
	res.Runs, res.Writes = a.ran, a.wrote
	res.Programs = outsidePath(sc.BasePath, files)
	extra := a.sess.extra
	if len(unreadable) > 0 {
		extra = append(extra, findingUnreadable)
		for _, why := range unreadable {
			res.Notes = append(res.Notes, "could not check "+why)
		}
		slices.Sort(res.Notes)
	}
	res.Notes = append(res.Notes, a.sess.notes...)
	for _, f := range extra {
		if !slices.ContainsFunc(res.Findings, func(g Finding) bool { return g.Rule == f.Rule }) {
			res.Findings = append(res.Findings, f)
			if f.Verdict.rank() > res.Verdict.rank() {
				res.Verdict = f.Verdict
			}
		}
	}
	slices.SortStableFunc(res.Findings, func(x, y Finding) int { return y.Verdict.rank() - x.Verdict.rank() })
	return res
}

// outsidePath lists the compiled programs among files that the command runs from a directory
// not on base (the session's starting PATH; "" is the usual system PATH), sorted.
func outsidePath(base string, files map[string]desc) []string {
	if base == "" {
		base = defaultPath
	}
	dirs := strings.Split(base, ":")
	var out []string
	for k, d := range files {
		if !d.program || !strings.HasPrefix(k, "\x01") {
			continue
		}
		if p := k[1:]; !slices.Contains(dirs, path.Dir(p)) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// sessionWalk runs one pass of the analysis over command.
func (a *analyzer) sessionWalk(command string, files map[string]desc, execs map[string]string, unreadable map[string]string, reads *int) {
	defer func() {
		if r := recover(); r != nil {
			a.add(ruleInternalError) // fail closed, as Classify does
		}
	}()
	a.walk(command, func() {
		for p, lang := range execs {
			a.noteRun(lang) // tools.code_execution applies to the interpreter the #! line names
			a.analyzeCode(lang, files["\x01"+p].text)
		}
		a.shadowed(files, unreadable, reads)
	})
}

// readWanted reads the files the last pass asked for and reports whether there were any.
func readWanted(sc Context, wants map[string]string, files map[string]desc, execs *map[string]string, unreadable map[string]string, reads *int) bool {
	fresh := false
	for p, kind := range wants {
		if _, done := files[p]; done {
			continue
		}
		if _, done := files["\x01"+p]; done {
			continue
		}
		if _, done := unreadable[p]; done {
			continue
		}
		fresh = true
		if strings.HasPrefix(p, "\x00") {
			unreadable[p] = p[1:] + ": its directory is not known"
			continue
		}
		if *reads >= maxSessionReads {
			unreadable[p] = p + ": too many files to check in one command"
			continue
		}
		*reads++
		data, err := readSession(sc, p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			files[p] = desc{known: true} // nothing there: running it fails
		case err != nil:
			unreadable[p] = p + ": " + err.Error()
		case binary(data):
			files["\x01"+p] = desc{program: kind == "exec"} // a program, not a script: nothing to read
		default:
			if lang := shebangLang(data); kind == "exec" && lang != "" && lang != "sh" {
				if *execs == nil {
					*execs = map[string]string{}
				}
				(*execs)[p] = lang
				files["\x01"+p] = desc{text: string(data), known: true}
				continue
			}
			files[p] = desc{text: string(data), known: true}
		}
	}
	return fresh
}

func readSession(sc Context, p string) ([]byte, error) {
	if sc.ReadFile == nil {
		return nil, errors.New("the session cannot read files")
	}
	b, err := sc.ReadFile(p)
	if err == nil && len(b) > MaxScriptRead {
		err = ErrTooLarge
	}
	return b, err
}

// sessionAnalyzer returns an analyzer that starts in the session's directory with its
// variables and the files read so far.
func (c *Classifier) sessionAnalyzer(sc Context, files map[string]desc) *analyzer {
	a := newAnalyzer(c)
	a.sess = &session{ctx: sc, disk: files}
	if d := cleanAbs(sc.Dir); d != "" {
		a.cwd = d
	} else {
		a.cwdDyn = true
	}
	if len(files) > 0 {
		a.files = make(map[string]desc, len(files))
		for p, d := range files {
			if !strings.HasPrefix(p, "\x01") {
				a.files[p] = d
			}
		}
	}
	for k, v := range sc.Env {
		switch k {
		case "HOME", "PWD", "OLDPWD", "SHLVL", "_":
			continue
		}
		if strings.HasPrefix(k, "__HERMES") || strings.HasPrefix(k, "BASH_FUNC_") {
			continue
		}
		a.setVar(k, value{f: field{s: v}})
	}
	return a
}

// sessionPrelude judges what the session itself will run before the command: BASH_ENV and
// ENV files, PROMPT_COMMAND, and variables the command sets for itself.
func (a *analyzer) sessionPrelude() {
	sc := a.sess.ctx
	for k := range sc.CmdEnv {
		// Set through the API for this command, out of sight of the text: any of them asks.
		if sessionVars[k] {
			a.add(ruleSessionEnv)
			a.sess.notes = append(a.sess.notes, "the command sets "+k)
		}
		if isGateEnv(k) {
			a.add(ruleGateEnv)
		}
	}
	for _, k := range [...]string{"BASH_ENV", "ENV"} {
		if v := sc.Env[k]; v != "" {
			a.want(a.target(lit(a.expandHome(v))), "sh")
			if d, ok := a.files[a.target(lit(a.expandHome(v))).p]; ok && d.known {
				a.shellStdin(d)
			}
		}
	}
	if v := sc.Env["PROMPT_COMMAND"]; v != "" {
		a.shellCode(lit(v), desc{}, nil, false)
	}
	if sc.Env["LD_PRELOAD"] != "" || sc.Env["LD_AUDIT"] != "" {
		a.sess.extra = append(a.sess.extra, findingPreload)
	}
}

// flagSessionVar records that the command sets one of the session variables.
// It is the same finding with or without a session, so `policy check` and the gate agree.
func (a *analyzer) flagSessionVar(name string, val field) {
	if !sessionVarRisky(name, val) {
		return
	}
	a.add(ruleSessionEnv)
	if a.sess == nil {
		return
	}
	note := "the command changes " + name
	if !slices.Contains(a.sess.notes, note) {
		a.sess.notes = append(a.sess.notes, note)
	}
}

// shadowed reads the programs the command runs by bare name from directories added to PATH
// since the session started, and analyses them.
func (a *analyzer) shadowed(files map[string]desc, unreadable map[string]string, reads *int) {
	cur := a.sess.ctx.Env["PATH"]
	if cur == "" {
		return
	}
	base := a.sess.ctx.BasePath
	if base == "" {
		base = defaultPath
	}
	baseDirs := strings.Split(base, ":")
	var added []string
	for _, d := range strings.Split(cur, ":") {
		if d == "" || slices.Contains(baseDirs, d) || slices.Contains(added, d) {
			continue
		}
		added = append(added, d)
	}
	if len(added) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, name := range a.ran {
		if seen[name] || strings.ContainsRune(name, '/') || isBuiltin(name) {
			continue
		}
		seen[name] = true
		for _, d := range added {
			p := path.Clean(d + "/" + name)
			if !strings.HasPrefix(p, "/") {
				p = a.target(lit(p)).p
			}
			if d, ok := files[p]; ok {
				if d.known && d.text != "" {
					a.shellStdin(d)
				}
				break
			}
			if _, ok := files["\x01"+p]; ok {
				a.sess.extra = append(a.sess.extra, findingShadowBinary)
				a.sess.notes = append(a.sess.notes, name+" runs "+p)
				break
			}
			if _, ok := unreadable[p]; ok {
				break
			}
			a.want(target{p: p}, "exec")
		}
	}
}

func isBuiltin(name string) bool {
	switch name {
	case "cd", "echo", "printf", "export", "unset", "set", "read", "test", "[", "true", "false", ":", "exit",
		"return", "shift", "eval", "exec", ".", "source", "alias", "type", "command", "builtin", "local",
		"declare", "typeset", "readonly", "wait", "trap", "pwd", "let", "shopt", "pushd", "popd", "dirs",
		"umask", "ulimit", "hash", "getopts", "jobs", "fg", "bg", "kill", "history", "times":
		return true
	}
	return false
}

// binary reports whether data looks like a compiled program rather than a script.
func binary(data []byte) bool {
	head := data[:min(len(data), 8192)]
	return bytes.HasPrefix(head, []byte("\x7fELF")) || bytes.IndexByte(head, 0) >= 0
}

// shebangLang returns the language a script's #! line names: "sh" for shells, a language for
// interpreters, "" without a #! line.
func shebangLang(data []byte) string {
	if !bytes.HasPrefix(data, []byte("#!")) {
		return ""
	}
	line, _, _ := bytes.Cut(data[2:], []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return "sh"
	}
	prog := fields[0]
	if path.Base(prog) == "env" {
		prog = ""
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") && !strings.Contains(f, "=") {
				prog = f
				break
			}
		}
	}
	name := normName(prog)
	if isShell(name) {
		return "sh"
	}
	if lang, ok := interpreterLangs[name]; ok {
		return langOfInterp(name, lang)
	}
	return "sh"
}

// langOfInterp maps an interpreter to the language key analyzeCode takes.
func langOfInterp(name, lang string) string {
	switch lang {
	case "python", "perl", "ruby", "php", "lua", "node", "awk", "pwsh":
		return lang
	}
	return name
}

// ClassifyScript classifies a file's content as the program it would be when run: its #!
// line (or the name's extension) picks the language. Files that are neither (data, programs)
// are safe to write.
func (c *Classifier) ClassifyScript(sc Context, name string, data []byte) Analysis {
	if binary(data) {
		return Analysis{Command: name, Verdict: VerdictSafe, Findings: []Finding{}}
	}
	lang := shebangLang(data)
	if lang == "" {
		switch path.Ext(name) {
		case ".sh", ".bash", ".zsh", ".ksh", "":
			lang = "sh"
		case ".py":
			lang = "python"
		case ".pl":
			lang = "perl"
		case ".rb":
			lang = "ruby"
		case ".js", ".mjs", ".cjs", ".ts":
			lang = "node"
		case ".php":
			lang = "php"
		case ".lua":
			lang = "lua"
		default:
			return Analysis{Command: name, Verdict: VerdictSafe, Findings: []Finding{}}
		}
	}
	if lang == "sh" {
		return c.ClassifyIn(sc, string(data))
	}
	cl := c.withWorkDir(sc)
	a := cl.sessionAnalyzer(sc, nil)
	func() {
		defer func() {
			if r := recover(); r != nil {
				a.add(ruleInternalError)
			}
		}()
		a.analyzeCode(lang, string(data))
		a.finish()
	}()
	return a.result(name)
}

// derived caches classifiers that differ from their parent only in the working tree.
var derived sync.Map // derivedKey → *Classifier

type derivedKey struct {
	c   *Classifier
	dir string
}

// withWorkDir returns c, or, when c has no working tree and sc names one, a classifier like c
// with that working tree.
func (c *Classifier) withWorkDir(sc Context) *Classifier {
	w := cleanAbs(sc.WorkDir)
	if c.workDir != "" || w == "" || w == "/" {
		return c
	}
	k := derivedKey{c, w}
	if v, ok := derived.Load(k); ok {
		return v.(*Classifier)
	}
	n := &Classifier{workDir: w, home: c.home, protected: c.protected, host: c.host}
	n.parsers.New = c.parsers.New
	v, _ := derived.LoadOrStore(k, n)
	return v.(*Classifier)
}
