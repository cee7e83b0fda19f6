package gate

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// Store keeps each session's approvals and call count in files under a directory, so that a
// named session keeps them across CLI runs, like its shell state.
type Store struct{ dir string }

// NewStore returns a store in dir (created 0700 on first save).
func NewStore(dir string) *Store { return &Store{dir: dir} }

type storedSession struct {
	Calls    int      `json:"calls"`
	Approved []string `json:"approved,omitempty"`
}

func (st *Store) path(backend, session string) string {
	return filepath.Join(st.dir, backend, session+".json")
}

func (st *Store) load(backend, session string) storedSession {
	var s storedSession
	if b, err := os.ReadFile(st.path(backend, session)); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	return s
}

func (st *Store) save(backend, session string, s storedSession) error {
	p := st.path(backend, session)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (st *Store) forget(backend, session string) { os.Remove(st.path(backend, session)) }
