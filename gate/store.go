package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hermes-sandbox/hermes-sandbox/internal/flock"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// Store keeps each session's approvals, call count and starting state in files under a
// directory, so that a named session keeps them across CLI runs, like its shell state. Every
// change is a locked read-modify-write, so concurrent processes on one session add up, and a
// file that does not decode is an error naming it: the gate then refuses rather than start
// the count again from zero.
type Store struct{ dir string }

// NewStore returns a store in dir (created 0700 on first save).
func NewStore(dir string) *Store { return &Store{dir: dir} }

type storedSession struct {
	Calls    int      `json:"calls"`
	Approved []string `json:"approved,omitempty"`
	// BasePath is the session's PATH when the gate first saw it: directories added later
	// are searched for programs that shadow the usual ones.
	BasePath string `json:"base_path,omitempty"`
	// WorkDir is the session's directory when the gate first saw it, the working tree
	// when the configuration names none.
	WorkDir string `json:"work_dir,omitempty"`
}

func (st *Store) path(backend, session string) string {
	return filepath.Join(st.dir, backend, session+".json")
}

// CorruptError says a store file exists but does not decode.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("the gate's session store %s is corrupt (%v): repair or delete it (deleting it resets the session's approvals and call count)", e.Path, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

func (st *Store) load(backend, session string) (storedSession, error) {
	var s storedSession
	p := st.path(backend, session)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read the gate's session store %s: %w", p, err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, &CorruptError{Path: p, Err: err}
	}
	if s.Calls < 0 {
		return s, &CorruptError{Path: p, Err: errors.New("negative call count")}
	}
	return s, nil
}

// update changes a session's record under the session's lock and returns the new record.
func (st *Store) update(backend, session string, fn func(*storedSession)) (storedSession, error) {
	p := st.path(backend, session)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return storedSession{}, err
	}
	unlock, err := flock.Lock(p + ".lock")
	if err != nil {
		return storedSession{}, err
	}
	defer unlock()
	s, err := st.load(backend, session)
	if err != nil {
		return s, err
	}
	fn(&s)
	slices.Sort(s.Approved)
	s.Approved = slices.Compact(s.Approved)
	b, err := json.Marshal(s)
	if err != nil {
		return s, err
	}
	return s, sandbox.WriteFileAtomic(p, b)
}

func (st *Store) forget(backend, session string) {
	p := st.path(backend, session)
	os.Remove(p)
	os.Remove(p + ".lock")
}
