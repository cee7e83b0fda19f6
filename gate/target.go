package gate

import (
	"context"
	"path"
	"slices"
	"strings"

	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// fileTarget is the file a file call names, in each spelling the gate judges: the file API
// expands "~" and follows symbolic links where a shell word in quotes would not, so the path
// as written alone says too little.
type fileTarget struct {
	written string // as the caller wrote it
	// abs is written with "~" expanded with the session's HOME and made absolute against the
	// session's directory, as the session's file calls do; "" when what it needs is unknown.
	abs string
	// real is the file as the session resolves it inside the sandbox, symbolic links
	// followed (sandbox.PathResolver); "" when the session cannot say.
	real string
}

// fileTarget works out which file p names. A session that implements sandbox.PathResolver
// says so itself, in the sandbox's own view of its files; where it does not, or cannot (a
// helper older than the call, a per-command fallback), the gate applies "~" and the
// directory from the session's state. p is judged as written as well, so the call is never
// judged on less than before, and the strictest verdict of all spellings wins.
func (s *Session) fileTarget(ctx context.Context, p string) fileTarget {
	t := fileTarget{written: p}
	if r, ok := s.inner.(sandbox.PathResolver); ok {
		rctx, cancel := context.WithTimeout(ctx, stateTimeout)
		real, err := r.ResolvePath(rctx, p)
		cancel()
		switch {
		case err != nil:
			s.b.opts.Logger.Debug("path not resolved; judged without symbolic links followed", "path", p, "err", err)
		case path.IsAbs(real):
			t.real = path.Clean(real)
		}
	}
	switch {
	case path.IsAbs(p):
		t.abs = path.Clean(p)
	case t.real == "":
		cwd, env := s.shellState(ctx)
		t.abs = absPath(p, cwd, env["HOME"])
	}
	// With real known, the session applied its own HOME and directory: the written
	// spelling below is judged in the same directory, so asking for them adds nothing.
	return t
}

// absPath applies "~" (as home) and the directory cwd to p the way the session's file calls
// do: only "~" and "~/…" are expanded ("~user" is a relative name to them). It returns ""
// when what it needs is unknown.
func absPath(p, cwd, home string) string {
	switch {
	case path.IsAbs(p):
		return path.Clean(p)
	case p == "~" || strings.HasPrefix(p, "~/"):
		if !path.IsAbs(home) {
			return ""
		}
		return path.Join(home, p[1:])
	case cwd == "":
		return ""
	}
	return path.Join(cwd, p)
}

// words returns the target's spellings as shell words, each once: as written, with a
// leading "~" left unquoted so that the classifier expands it as the file call does (with
// its own idea of home, which matters when the session's is unknown), then the absolute and
// resolved paths.
func (t fileTarget) words() []string {
	var w string
	switch p := t.written; {
	case p == "~":
		w = "~"
	case strings.HasPrefix(p, "~/"):
		w = "~/"
		if rest := strings.TrimLeft(p[2:], "/"); rest != "" {
			w += quote(rest)
		}
	default:
		w = quote(p)
	}
	out := []string{w}
	for _, p := range [...]string{t.abs, t.real} {
		if q := quote(p); p != "" && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// reading is the call classified as prog reading (or listing) every spelling: `cat 'a' 'b'`.
func (t fileTarget) reading(prog string) string {
	return prog + " " + strings.Join(t.words(), " ")
}

// writing is the call classified as a write to every spelling: `cat > 'a'; cat > 'b'` (one
// redirection each, as `cat > a > b` would also read as emptying a).
func (t fileTarget) writing() string {
	ws := t.words()
	for i, w := range ws {
		ws[i] = "cat > " + w
	}
	return strings.Join(ws, "; ")
}

// shown is the path for messages, approval prompts and the audit log: as written, and the
// file it names when that reads differently.
func (t fileTarget) shown() string {
	to := t.real
	if to == "" {
		to = t.abs
	}
	if to == "" || to == t.written {
		return t.written
	}
	return t.written + " (resolves to " + to + ")"
}
