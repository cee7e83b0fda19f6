package policy

import (
	"fmt"
	"path"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Verdict is the outcome of classifying a command.
type Verdict string

// The verdicts, from least to most severe.
const (
	VerdictSafe      Verdict = "safe"
	VerdictDangerous Verdict = "dangerous"
	VerdictHardline  Verdict = "hardline"
)

// ParseVerdict returns the verdict named s, or an error for an unknown name.
func ParseVerdict(s string) (Verdict, error) {
	switch v := Verdict(s); v {
	case VerdictSafe, VerdictDangerous, VerdictHardline:
		return v, nil
	}
	return "", fmt.Errorf("policy: unknown verdict %q (want safe, dangerous or hardline)", s)
}

// UnmarshalText decodes a verdict and rejects unknown values.
func (v *Verdict) UnmarshalText(b []byte) error {
	p, err := ParseVerdict(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// Valid reports whether v is one of the three verdicts.
func (v Verdict) Valid() bool { return v.rank() >= 0 }

// AtLeast reports whether v is at least as severe as o.
func (v Verdict) AtLeast(o Verdict) bool { return v.rank() >= o.rank() }

func (v Verdict) rank() int {
	switch v {
	case VerdictSafe:
		return 0
	case VerdictDangerous:
		return 1
	case VerdictHardline:
		return 2
	}
	return -1
}

// Finding is one reason a command is not safe. Rule is a stable kebab-case
// id; Description is a stable sentence that allowlists use as their key.
type Finding struct {
	Rule        string  `json:"rule"`
	Description string  `json:"description"`
	Verdict     Verdict `json:"-"`
}

// Analysis is the classification of one command. Findings is never nil.
type Analysis struct {
	Command  string    `json:"command"`
	Verdict  Verdict   `json:"verdict"`
	Findings []Finding `json:"findings"`
	// Notes say more about some findings (a parse error, a file that could not be read);
	// they are for people, not allowlist keys.
	Notes []string `json:"notes,omitempty"`
	// Runs lists the programs the command runs, wrappers (env, sudo, sh -c, xargs,
	// find -exec…) looked through; set by ClassifyIn.
	Runs []string `json:"-"`
	// Writes lists the files the command writes (devices left out; an unresolved name is
	// kept with its unknown parts); set by ClassifyIn, for tools.file_write.
	Writes []string `json:"-"`
	// Programs lists the compiled programs the command runs by path from outside the
	// directories of the PATH the session started with (a copy of an interpreter under
	// another name, a binary the agent built); set by ClassifyIn, for tools.code_execution:
	// what they run is code nobody can read here.
	Programs []string `json:"-"`
}

// Options configure a [Classifier].
type Options struct {
	// ProtectedPaths are extra files or directories (the tool's own config,
	// secrets and audit log) that no command may write, edit or delete.
	ProtectedPaths []string
	// WorkDir is the root of the working tree. Deletes inside it are
	// routine; deletes outside it need approval. Relative paths in a
	// command are taken to be inside it.
	WorkDir string
	// Home is the home directory of the user the command runs as. "~" and
	// $HOME are always recognised; Home also lets absolute spellings of the
	// same directory be recognised.
	Home string
	// Host says commands run directly on a machine beside its other containers (the local
	// and ssh backends), as Context.Host does for one session: entering a container or a
	// namespace from there needs approval. policy check sets it from the selected backend.
	Host bool
}

// Classifier classifies commands. It is safe for concurrent use.
type Classifier struct {
	workDir   string   // cleaned absolute path, or ""
	home      string   // cleaned absolute path, or homeMark
	protected []string // canonical protected paths (see canonProtected)
	host      bool     // Options.Host
	parsers   sync.Pool
}

// New returns a classifier configured by opts.
func New(opts Options) *Classifier {
	c := &Classifier{home: homeMark, host: opts.Host}
	if w := cleanAbs(opts.WorkDir); w != "" && w != "/" {
		c.workDir = w
	}
	if h := cleanAbs(opts.Home); h != "" && h != "/" {
		c.home = h
	}
	for _, p := range opts.ProtectedPaths {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if strings.HasPrefix(p, "~") {
			p = c.home + p[1:]
		}
		if !strings.HasPrefix(p, "/") {
			if c.workDir == "" {
				continue
			}
			p = c.workDir + "/" + p
		}
		c.protected = append(c.protected, path.Clean(p))
	}
	c.parsers.New = func() any { return syntax.NewParser(syntax.Variant(syntax.LangBash)) }
	return c
}

func cleanAbs(p string) string {
	p = strings.TrimSpace(p)
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	return path.Clean(p)
}

var defaultClassifier = New(Options{})

// Classify classifies command with a classifier built from zero Options.
func Classify(command string) Analysis { return defaultClassifier.Classify(command) }

// maxCommandLen bounds the text the classifier will parse at all.
const maxCommandLen = 1 << 20

// Classify parses command and returns its verdict and findings.
func (c *Classifier) Classify(command string) (res Analysis) {
	a := newAnalyzer(c)
	defer func() {
		if r := recover(); r != nil {
			// Fail closed: a command the analyser cannot handle needs approval.
			a.add(ruleInternalError)
		}
		res = a.result(command)
	}()
	a.walk(command, nil)
	return
}

// walk is the one analysis of a command line, with or without a session (Classify and
// ClassifyIn both call it, so `policy check` and the gate cannot drift apart): the checks of
// the raw text, the session's prelude when there is a session, the walk of the tree, then
// session (the session's extra checks) and the checks of the whole line.
func (a *analyzer) walk(command string, session func()) {
	if strings.TrimSpace(command) == "" {
		return
	}
	if len(command) > maxCommandLen {
		a.add(ruleTooComplex)
		return
	}
	a.checkHidden(command)
	if a.sess != nil {
		a.sessionPrelude()
	}
	a.runScript(command, desc{}, nil, false)
	if session != nil {
		session()
	}
	a.finish()
}
