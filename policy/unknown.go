package policy

import (
	"encoding/hex"
	"regexp"
	"strings"
	"unicode"

	"mvdan.cc/sh/v3/syntax"
)

// The stance on the unknown. A command the classifier cannot understand is
// never silently safe; it needs approval with a reason that says why:
//
//   - text that does not parse as shell: "unparseable";
//   - control bytes (other than tab and newline), terminal escape
//     sequences, zero-width and bidirectional-override characters anywhere
//     in the command, or non-ASCII letters in a command name (look-alikes
//     such as Cyrillic "с" or fullwidth "ｒｍ"): "hidden-characters";
//   - a command name built at run time that cannot be resolved, or built by
//     pattern substitution, slicing or indirection (${0/x/r}m): "dynamic-command";
//   - code for an interpreter read from a source the classifier cannot see,
//     or an inline program longer than maxInlineCode: "unknown-stdin-script"
//     and "too-complex";
//   - anything that exhausts the analysis budget: "too-complex".
//
// Non-ASCII text in arguments (echo "café") is ordinary and stays safe.

// maxInlineCode bounds an interpreter one-liner the classifier will vouch
// for; longer inline programs need approval.
const maxInlineCode = 16 << 10

// checkHidden flags characters that hide what a command does from the
// person reading it.
func (a *analyzer) checkHidden(command string) {
	for _, r := range command {
		switch {
		case r == '\t' || r == '\n':
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			a.add(ruleLookalike)
			return
		case r >= 0x200b && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2060 && r <= 0x2064,
			r >= 0x2066 && r <= 0x2069, r == 0xfeff, r == 0x00ad, r == 0x180e:
			a.add(ruleLookalike)
			return
		}
	}
}

// lookalikeName reports whether a command name holds non-ASCII letters.
func lookalikeName(name string) bool {
	for _, r := range name {
		if r > unicode.MaxASCII {
			return true
		}
	}
	return false
}

// computedWord reports whether a command word is built by parameter
// operations that hide the name: substitution, slicing, indirection or
// case changes.
func computedWord(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if p, ok := n.(*syntax.ParamExp); ok {
			if p.Repl != nil || p.Slice != nil || p.Excl || p.Exp != nil && p.Exp.Op != syntax.DefaultUnset && p.Exp.Op != syntax.DefaultUnsetOrNull {
				found = true
			}
		}
		return !found
	})
	return found
}

var (
	infiniteMarks = []string{"while true", "while 1", "while(1)", "while (1)", "while(true)", "while (true)", "for(;;)",
		"for (;;)", "iter(int", "loop {", "loop do", "itertools.count", "while :", "1 while", "while(){", "until false"}
	hugeAlloc = regexp.MustCompile(`\*\s*10\s*\*\*\s*(1[2-9]|[2-9][0-9])\b|\(\s*1e1[2-9]\s*\)`)
	hexPack   = regexp.MustCompile(`pack\(\s*["']H\*["']\s*,\s*["']([0-9a-fA-F]+)["']`)
	tclExec   = regexp.MustCompile(`(?m)(?:^|[;\[{]\s*)(?:exec|spawn)\s+([^;\]\n}]+)`)
	appleDo   = regexp.MustCompile(`do (?:shell )?script\s+"((?:[^"\\]|\\.)*)"`)
	homeRefs  = strings.NewReplacer(`"$ENV{HOME}`, `"~`, `$ENV{HOME}`, `"~"`, `$ENV{'HOME'}`, `"~"`, `$ENV{"HOME"}`, `"~"`,
		`Deno.env.get('HOME')`, `'~'`, `Deno.env.get("HOME")`, `"~"`, `homedir()`, `'~'`, `Sys.getenv("HOME")`, `"~"`)
)

// codeExtra applies the interpreter rules that look at a whole program:
// fork and allocation loops, environment exfiltration, hex-packed code,
// Tcl/expect and AppleScript shell-outs, and home-directory references.
func (a *analyzer) codeExtra(lang, code string) {
	if len(code) > maxInlineCode {
		a.add(ruleTooComplex)
	}
	low := strings.ToLower(code)
	infinite := containsAny(low, infiniteMarks) && !containsAny(low, []string{"break", "return", "exit(", "sleep"})
	if infinite && containsAny(low, []string{"fork", "spawn", "popen", "start-process"}) {
		a.add(ruleForkBomb)
	}
	if infinite && containsAny(low, []string{".append(", ".push(", "+=", "malloc", ".concat(", "extend("}) || hugeAlloc.MatchString(low) {
		a.add(ruleFillDisk)
	}
	for _, f := range agentSettingsFiles {
		if strings.Contains(code, f) && codeWrites(code) {
			a.add(ruleAgentSettings) // json.dump(d, open(settings, "w"))
			break
		}
	}
	if hasNetFetch(code) && containsAny(code, []string{"os.environ", "process.env", "$ENV{", "ENV[", "getenv", "System.getenv"}) {
		a.add(ruleExfil)
	}
	for _, m := range hexPack.FindAllStringSubmatch(code, 4) {
		if b, err := hex.DecodeString(m[1]); err == nil {
			a.add(ruleObfuscated)
			a.analyzeCode(lang, string(b))
		}
	}
	switch lang {
	case "tclsh", "expect":
		for _, m := range tclExec.FindAllStringSubmatch(code, 8) {
			a.shellCode(field{s: m[1]}, desc{}, nil, false)
		}
	case "osascript":
		for _, m := range appleDo.FindAllStringSubmatch(code, 8) {
			a.shellCode(field{s: strings.ReplaceAll(m[1], `\"`, `"`)}, desc{}, nil, false)
		}
	case "pwsh":
		// PowerShell commands read like shell commands often enough to classify.
		a.runScriptMode(code, desc{}, nil, false, false)
	}
	if r := homeRefs.Replace(code); r != code {
		a.analyzeCode(lang, r)
	}
}
