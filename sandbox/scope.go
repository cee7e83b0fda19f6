package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
)

// Scope separates the sandboxes of one state directory from those of others (other users,
// other test runs) on a shared engine or host: every name a backend gives a sandbox carries
// a short hash of the state directory, so a later process using the same directory finds
// its sessions again and never touches anyone else's.
type Scope struct{ id, dir string }

// NewScope returns the scope of a state directory (Dir makes it absolute).
func NewScope(stateDir string) (Scope, error) {
	if stateDir == "" {
		return Scope{}, fmt.Errorf("no state directory: %w", ErrInvalidConfig)
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return Scope{}, fmt.Errorf("state directory: %w", err)
	}
	sum := sha256.Sum256([]byte(abs))
	return Scope{id: hex.EncodeToString(sum[:])[:8], dir: abs}, nil
}

// Dir is the state directory's absolute path.
func (s Scope) Dir() string { return s.dir }

// ID is the scope's hash, for labels and for names of things that are not sessions.
func (s Scope) ID() string { return s.id }

// Name is the sandbox name of a session: hermes-<scope>-<session>.
func (s Scope) Name(session string) string { return "hermes-" + s.id + "-" + session }

// Session returns the session whose sandbox is called name, or "" when name is not one of
// this scope's session names. A leading "/" (docker's container names) is ignored.
func (s Scope) Session(name string) string {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "/"), "hermes-"+s.id+"-")
	if !ok || ValidateSessionName(rest) != nil {
		return ""
	}
	return rest
}
