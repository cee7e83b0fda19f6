//go:build unix

package agent

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
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
	_, _, b := st.begin()
	// The state directory becomes a file: nothing can be written below it.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.update([]byte("raw"), b, "/", map[string]string{"HERMES_X": "after"}, nil); err == nil {
		t.Fatal("update() with an unwritable state = nil; want an error")
	}
	cwd, env := st.snapshot()
	if cwd != work || len(env) != 1 || env[0] != "HERMES_X=before" {
		t.Errorf("after a failed save: cwd %q env %q; want %q [HERMES_X=before]", cwd, env, work)
	}
	if st.unchanged([]byte("raw"), b) {
		t.Error("a state that was not taken counts as the current one")
	}
}

// TestConcurrentUpdatesAllKept: commands that ran at the same time, in this helper or in
// another helper of the same session (a second sessionState on the same directory), each
// keep what they changed; what a command did not change is not reset to the value it
// started with.
func TestConcurrentUpdatesAllKept(t *testing.T) {
	dir := t.TempDir()
	work := t.TempDir()
	st, err := loadState(dir, []string{"HERMES_KEEP=1", "HERMES_GONE=1"}, work)
	if err != nil {
		t.Fatal(err)
	}
	other, err := loadState(dir, nil, work)
	if err != nil {
		t.Fatal(err)
	}
	// Three commands start from the same state: two in st, one in the other helper.
	_, _, b1 := st.begin()
	_, _, b2 := st.begin()
	_, _, b3 := other.begin()
	end := func(b base, change func(map[string]string)) map[string]string {
		env := maps.Clone(b.env)
		change(env)
		return env
	}
	sub := t.TempDir()
	if err := st.update([]byte("1"), b1, work, end(b1, func(e map[string]string) { e["HERMES_A"] = "a" }), nil); err != nil {
		t.Fatal(err)
	}
	if err := other.update([]byte("3"), b3, sub, end(b3, func(e map[string]string) { e["HERMES_C"] = "c"; delete(e, "HERMES_GONE") }), nil); err != nil {
		t.Fatal(err)
	}
	if err := st.update([]byte("2"), b2, work, end(b2, func(e map[string]string) { e["HERMES_B"] = "b" }), nil); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*sessionState{st, other} {
		cwd, env, _ := s.begin()
		want := []string{"HERMES_A=a", "HERMES_B=b", "HERMES_C=c", "HERMES_KEEP=1"}
		if cwd != sub || !slices.Equal(env, want) {
			t.Errorf("after three concurrent commands: cwd %q env %q; want %q %q", cwd, env, sub, want)
		}
	}
	// The shortcut for an unchanged output holds only for a command that started from the
	// state that output produced.
	_, _, b4 := st.begin()
	if err := st.update([]byte("4"), b4, sub, end(b4, func(e map[string]string) { e["HERMES_D"] = "d" }), nil); err != nil {
		t.Fatal(err)
	}
	_, _, b5 := st.begin()
	if !st.unchanged([]byte("4"), b5) {
		t.Error("the same output from the state it produced counts as a change")
	}
	if st.unchanged([]byte("4"), b4) {
		t.Error("an output equal to the last one, from an older state, counts as no change")
	}
}

// TestSeedKeepsOtherHelpersChanges: a helper that adds a newly passed-through name at start
// does not save over what another helper of the session saved meanwhile.
func TestSeedKeepsOtherHelpersChanges(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	h1, err := loadState(dir, []string{"HERMES_OLD=1"}, work)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := loadState(dir, nil, work)
	if err != nil {
		t.Fatal(err)
	}
	_, _, b := h1.begin()
	env := maps.Clone(b.env)
	env["HERMES_A"] = "1"
	if err := h1.update([]byte("a"), b, work, env, nil); err != nil {
		t.Fatal(err)
	}
	if err := h2.seed(map[string]string{"HERMES_NEW": "x"}); err != nil {
		t.Fatal(err)
	}
	h3, err := loadState(dir, nil, work)
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := h3.begin()
	if want := []string{"HERMES_A=1", "HERMES_NEW=x", "HERMES_OLD=1"}; !slices.Equal(got, want) {
		t.Errorf("saved state after an export in one helper and a seed in another = %q; want %q", got, want)
	}
}
