//go:build unix

package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// sessionState is the shell state that carries over between commands: the working directory
// and the exported environment. It is saved after every script, so a new helper (a later CLI
// run) picks it up.
type sessionState struct {
	mu    sync.Mutex
	path  string            // guarded by mu
	cwd   string            // guarded by mu
	env   map[string]string // guarded by mu
	known []string          // guarded by mu
	fresh bool              // guarded by mu
	// lastRaw is the exit-trap output that produced the state of generation gen; a command
	// that started from that generation and reports the same output changed nothing, which
	// spares the parse and the save for most scripts.
	lastRaw []byte // guarded by mu
	// gen counts changes to cwd and env, here or taken from another helper's save.
	gen uint64 // guarded by mu
	// stamp and saved identify state.json as last read or written here: when another helper
	// of the session (another CLI process, another exec in the same sandbox) saves, they
	// change.
	stamp string // guarded by mu
	saved []byte // guarded by mu
}

// base is the state a command started from: what it changed is what differs at its end.
type base struct {
	cwd string
	env map[string]string
	gen uint64
}

// fileStamp identifies the file at path as it is now ("" if it cannot be read) and tells
// whether it changed too recently for that to be trusted.
func fileStamp(path string) (string, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	var ino uint64
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(sys.Ino)
	}
	// Timestamps can be as coarse as a clock tick, and a freed inode number is reused at
	// once, so two saves close together can look alike: a recent file is read to be sure.
	recent := time.Since(fi.ModTime()) < time.Second
	return fmt.Sprintf("%d/%d/%d", ino, fi.Size(), fi.ModTime().UnixNano()), recent
}

// refreshLocked takes the state another helper of the session saved since this one last
// read or wrote state.json.
func (st *sessionState) refreshLocked() {
	stamp, recent := fileStamp(st.path)
	if stamp == "" || stamp == st.stamp && !recent {
		return
	}
	b, err := os.ReadFile(st.path)
	if err != nil {
		return
	}
	if bytes.Equal(b, st.saved) {
		st.stamp = stamp
		return
	}
	var saved savedState
	if json.Unmarshal(b, &saved) != nil || saved.Env == nil {
		return
	}
	st.cwd, st.env, st.known = string(saved.Cwd), fromBytesMap(saved.Env), saved.Known
	st.stamp, st.saved, st.lastRaw = stamp, b, nil
	st.gen++
}

// begin returns the state a command starts from, with what other helpers saved taken first.
func (st *sessionState) begin() (string, []string, base) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.refreshLocked()
	return st.cwd, st.envListLocked(), base{cwd: st.cwd, env: maps.Clone(st.env), gen: st.gen}
}

type savedState struct {
	Cwd Bytes            `json:"cwd"`
	Env map[string]Bytes `json:"env"`
	// Known lists the names the session was ever given from outside, so that a name passed
	// through later (a new env_passthrough entry) is added, while one the session unset on
	// purpose stays unset.
	Known []string `json:"known,omitempty"`
}

func loadState(dir string, initialEnv []string, initialCwd string) (*sessionState, error) {
	st := &sessionState{path: filepath.Join(dir, "state.json")}
	stamp, _ := fileStamp(st.path)
	b, err := os.ReadFile(st.path)
	if err == nil {
		var saved savedState
		if err := json.Unmarshal(b, &saved); err == nil && saved.Env != nil {
			st.cwd, st.env, st.known = string(saved.Cwd), fromBytesMap(saved.Env), saved.Known
			st.stamp, st.saved = stamp, b
			if fi, err := os.Stat(st.cwd); err != nil || !fi.IsDir() {
				st.cwd = homeOr(st.env, "/")
			}
			given := map[string]string{}
			for _, kv := range initialEnv {
				if k, v, ok := strings.Cut(kv, "="); ok {
					given[k] = v
				}
			}
			return st, st.seed(given)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("agent: read state: %w", err)
	}
	st.fresh = true
	st.env = map[string]string{}
	for _, kv := range initialEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			st.env[k] = v
			st.known = append(st.known, k)
		}
	}
	st.cwd = initialCwd
	if st.cwd == "" {
		st.cwd = homeOr(st.env, "")
	}
	if st.cwd == "" {
		st.cwd, _ = os.Getwd()
	}
	st.cwd = expandHome(st.cwd, st.env)
	if err := os.MkdirAll(st.cwd, 0o755); err != nil {
		return nil, fmt.Errorf("agent: working directory %s: %w", st.cwd, err)
	}
	return st, st.save()
}

func homeOr(env map[string]string, def string) string {
	if h := env["HOME"]; h != "" {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			return h
		}
	}
	return def
}

func expandHome(p string, env map[string]string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return env["HOME"] + p[1:]
	}
	return p
}

// seed adds variables whose names the session has never been given, as a new passthrough
// name would be at start-up; a name the session knows (and perhaps unset) is left alone.
func (st *sessionState) seed(env map[string]string) error {
	st.mu.Lock()
	need := false
	for k := range env {
		need = need || k != "" && !slices.Contains(st.known, k)
	}
	st.mu.Unlock()
	if !need {
		return nil
	}
	// A read-modify-write of the saved state, like update: under the lock file, from what
	// other helpers of the session saved.
	unlock, err := st.lock()
	if err != nil {
		return err
	}
	defer unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.refreshLocked()
	changed := false
	for k, v := range env {
		if k == "" || slices.Contains(st.known, k) {
			continue
		}
		st.known = append(st.known, k)
		if _, set := st.env[k]; !set {
			st.env[k] = v
		}
		changed = true
	}
	if !changed {
		return nil
	}
	st.lastRaw = nil
	st.gen++
	return st.save()
}

// unchanged reports whether a command that started from b and reported raw changed nothing:
// it started from the state lastRaw produced and ended with the same output.
func (st *sessionState) unchanged(raw []byte, b base) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.lastRaw != nil && st.gen == b.gen && bytes.Equal(raw, st.lastRaw)
}

func (st *sessionState) snapshot() (string, []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cwd, st.envListLocked()
}

func (st *sessionState) envList() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.envListLocked()
}

func (st *sessionState) envListLocked() []string {
	out := make([]string, 0, len(st.env))
	for k, v := range st.env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// save writes the state atomically.
func (st *sessionState) save() error { return st.saveAs(st.cwd, st.env) }

// saveAs writes cwd and env as the state, atomically.
func (st *sessionState) saveAs(cwd string, env map[string]string) error {
	b, err := json.Marshal(savedState{Cwd: Bytes(cwd), Env: toBytesMap(env), Known: st.known})
	if err != nil {
		return err
	}
	tmp := st.path + ".tmp-" + randomHex(4) // helpers of one session may save at once
	if err := os.MkdirAll(filepath.Dir(tmp), 0o700); err != nil {
		return fmt.Errorf("agent: save state: %w", err)
	}
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("agent: save state: %w", err)
	}
	stamp, _ := fileStamp(tmp) // a rename keeps it; state.json itself may be newer by then
	if err := os.Rename(tmp, st.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("agent: save state: %w", err)
	}
	st.stamp, st.saved = stamp, b
	return nil
}

// lock takes the session's lock file, which every read-modify-write of the saved state holds
// (helpers of one session may run in several processes).
func (st *sessionState) lock() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(st.path), 0o700); err != nil {
		return nil, fmt.Errorf("agent: save state: %w", err)
	}
	unlock, err := flock.Lock(st.path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("agent: save state: %w", err)
	}
	return unlock, nil
}

// update applies what a script's exit trap reported (cwd and env at its end) to the state as
// it is now, which other commands may have changed since the script started from b: only
// what the script itself changed is applied, so concurrent commands (in this helper or in
// another of the same session) all keep their changes, and a later change to the same name
// wins. perCommand names variables the command was given for itself only: they are not
// carried over unless the script changed them. The read-modify-write holds the session's
// lock file, and the new state is taken only once it is on disk: a save that fails (a full
// disk) leaves the session as it was, which is what the command's result then says.
func (st *sessionState) update(raw []byte, b base, cwd string, env map[string]string, perCommand map[string]string) error {
	unlock, err := st.lock()
	if err != nil {
		return err
	}
	defer unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.refreshLocked()
	next := maps.Clone(st.env)
	for k, v := range env {
		if pv, ok := perCommand[k]; ok && pv == v {
			continue // given for this command only, and left as given
		}
		if bv, ok := b.env[k]; ok && bv == v {
			continue // not changed by this command
		}
		next[k] = v
	}
	for k := range b.env {
		if _, ok := env[k]; !ok {
			delete(next, k) // unset by this command
		}
	}
	nextCwd := st.cwd
	if cwd != "" && cwd != b.cwd {
		nextCwd = cwd
	}
	alone := st.gen == b.gen // nothing else changed the state while the command ran
	if err := st.saveAs(nextCwd, next); err != nil {
		st.lastRaw = nil
		return err
	}
	st.cwd, st.env = nextCwd, next
	st.gen++
	st.lastRaw = nil
	if alone && len(perCommand) == 0 {
		st.lastRaw = raw // the state is now exactly what raw says
	}
	return nil
}

// Variables the shell manages itself, or that belong to the helper's wrapper.
var volatileVars = map[string]bool{"SHLVL": true, "PWD": true, "_": true}

// parseTrapState reads what the wrapper's exit trap wrote: the working directory, a NUL, then
// the output of `export -p` (bash, dash, ash and zsh forms).
func parseTrapState(b []byte) (string, map[string]string, error) {
	cwd, rest, ok := bytes.Cut(b, []byte{0})
	if !ok {
		return "", nil, errors.New("agent: incomplete state from the shell")
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(bytes.NewReader(rest), "")
	if err != nil {
		return "", nil, fmt.Errorf("agent: parse exported environment: %w", err)
	}
	env := map[string]string{}
	for _, stmt := range f.Stmts {
		decl, ok := stmt.Cmd.(*syntax.DeclClause)
		if !ok {
			continue
		}
		for _, a := range decl.Args {
			if a.Name == nil || a.Naked || a.Array != nil || a.Index != nil {
				continue
			}
			name := a.Name.Value
			if volatileVars[name] || strings.HasPrefix(name, "__HERMES") || strings.HasPrefix(name, "__hermes") {
				continue
			}
			val := ""
			if a.Value != nil {
				// A fresh Config each time: expand mutates the one it is given.
				if val, err = expand.Literal(&expand.Config{}, a.Value); err != nil {
					continue
				}
			}
			env[name] = val
		}
	}
	return string(cwd), env, nil
}

func envGet(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
