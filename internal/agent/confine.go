package agent

import (
	"os"
	"path/filepath"
	"strings"
)

// Confinement is what the helper enforces on every command it starts, in the kernel where it
// can (Landlock on Linux): the Protect trees can be read but never changed, whatever path,
// link or rename a command uses.
type Confinement struct {
	// Protect are directories commands may read but never change (the tool's config and
	// state).
	Protect []string
	// Strict limits writes to the Writable trees (less Protect) and the session's scratch
	// directories. Without it, commands may write anywhere but Protect and the directories
	// on the way to it (those may gain no new entries).
	Strict   bool
	Writable []string
	// Required makes a confinement the kernel cannot enforce an error; otherwise the helper
	// runs unconfined and says so in its status.
	Required bool
	// NoUnixSockets refuses commands socket(AF_UNIX) (a seccomp filter), so none can connect
	// to a path socket of the host: the docker engine, a tmux or screen server, the D-Bus
	// session bus, an ssh-agent. socketpair(2) still works.
	NoUnixSockets bool `json:",omitempty"`
	// DropCaps takes from commands every capability that reaches past a mount namespace
	// (CAP_SYS_ADMIN, CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_MKNOD, …), for a helper that
	// runs as root: what a root command keeps is docker's default set, less CAP_MKNOD and
	// CAP_NET_RAW.
	DropCaps bool `json:",omitempty"`
}

// ConfinementStatus says whether commands are confined, and how.
type ConfinementStatus struct {
	// Enforced is true when the kernel enforces the confinement.
	Enforced bool
	// Detail says how (Landlock ABI version) or why not.
	Detail string
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// grant is one path that commands may change, and whether it is a directory tree.
type grant struct {
	path string
	dir  bool
}

// writeGrants lists the paths under roots that commands may change so that nothing in
// protect can be: a root that holds a protected tree is not granted whole, but entry by entry,
// down the way to each protected tree. Symbolic links are skipped: the kernel judges a write by
// the place it reaches, which is granted or not on its own.
func writeGrants(roots, protect []string) []grant {
	var out []grant
	var walk func(p string, depth int)
	walk = func(p string, depth int) {
		for _, q := range protect {
			if within(p, q) {
				return // protected: nothing under it
			}
		}
		holds := false
		for _, q := range protect {
			holds = holds || within(q, p)
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 {
			return
		}
		if !holds || !fi.IsDir() {
			out = append(out, grant{path: p, dir: fi.IsDir()})
			return
		}
		if depth > 64 {
			return
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return
		}
		for _, e := range entries {
			walk(filepath.Join(p, e.Name()), depth+1)
		}
	}
	for _, r := range roots {
		if r = filepath.Clean(r); filepath.IsAbs(r) {
			walk(r, 0)
		}
	}
	return out
}

// cleanPaths makes paths absolute and clean, resolving symbolic links where they exist, so
// that a protected tree named through a link is found by the place it really is.
func cleanPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		p = filepath.Clean(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		out = append(out, p)
	}
	return out
}

// checkWrite refuses a write_file (which the helper does itself, unconfined) whose target,
// with symbolic links resolved, lies in a protected tree, or outside the writable ones when
// strict: the same line the kernel draws for commands.
func (s *Server) checkWrite(target string) error {
	c := s.opts.Confine
	if c == nil {
		return nil
	}
	dir, rest := filepath.Dir(target), filepath.Base(target)
	for {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			dir = r
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
	real := filepath.Join(dir, rest)
	for _, p := range cleanPaths(c.Protect) {
		if within(real, p) && !within(real, s.scratchDir()) && !within(real, s.jobsDir()) {
			return &os.PathError{Op: "write", Path: target, Err: errProtected}
		}
	}
	if c.Strict {
		for _, w := range cleanPaths(append(c.Writable, "/dev")) {
			if within(real, w) {
				return nil
			}
		}
		return &os.PathError{Op: "write", Path: target, Err: errProtected}
	}
	return nil
}

var errProtected = os.ErrPermission
