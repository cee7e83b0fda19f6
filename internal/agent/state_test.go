package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUpdateKeepsStateWhenSaveFails: a state that cannot be written (a full disk, here a
// directory that is gone) is not taken, so the session keeps what it had and what the
// command's result says.
func TestUpdateKeepsStateWhenSaveFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	st, err := loadState(dir, []string{"HERMES_X=before"}, work)
	if err != nil {
		t.Fatal(err)
	}
	// The state directory becomes a file: nothing can be written below it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.update([]byte("raw"), "/", map[string]string{"HERMES_X": "after"}, nil); err == nil {
		t.Fatal("update() with an unwritable state = nil; want an error")
	}
	cwd, env := st.snapshot()
	if cwd != work || len(env) != 1 || env[0] != "HERMES_X=before" {
		t.Errorf("after a failed save: cwd %q env %q; want %q [HERMES_X=before]", cwd, env, work)
	}
	if st.unchanged([]byte("raw")) {
		t.Error("a state that was not taken counts as the current one")
	}
}
