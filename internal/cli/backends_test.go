//go:build unix

package cli_test

import (
	"strings"
	"testing"
)

// TestWorkspaceDecidesRoutineDeletes: the directory a backend declares as the agent's own
// (sandbox.Workspace) is where a recursive delete is routine; a backend without one (ssh:
// the remote account's files are not the agent's) makes the same delete dangerous.
func TestWorkspaceDecidesRoutineDeletes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ backend, want string }{
		{"docker", "safe"}, {"singularity", "safe"}, {"ssh", "dangerous"},
	} {
		code, out, errOut := e.run("", "--sandbox", tc.backend, "policy", "check", "rm -rf /workspace/build")
		if got := strings.Fields(out); len(got) == 0 || got[0] != tc.want {
			t.Errorf("--sandbox %s: rm -rf /workspace/build = %q (exit %d, %s); want %s", tc.backend, out, code, errOut, tc.want)
		}
	}
	// local: its working tree is terminal.cwd.
	if out := e.mustRun("--sandbox", "local", "policy", "check", "rm -rf "+e.dir+"/build"); !strings.HasPrefix(out, "safe") {
		t.Errorf("local: delete in terminal.cwd = %q; want safe", out)
	}
	if code, out, _ := e.run("", "--sandbox", "local", "policy", "check", "rm -rf /srv/build"); code != 1 || !strings.HasPrefix(out, "dangerous") {
		t.Errorf("local: delete outside terminal.cwd = %q (exit %d); want dangerous", out, code)
	}
}

// TestImageAndGCSayWhichBackendsHaveThem: a backend without images or garbage collection is
// refused with the names of those that have them, not silently given docker's.
func TestImageAndGCSayWhichBackendsHaveThem(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{"image", "list"}, {"image", "pull", "x"}, {"gc", "--dry-run"}} {
		for _, backend := range []string{"local", "ssh"} {
			code, _, errOut := e.run("", append([]string{"--sandbox", backend}, args...)...)
			if code != 1 || !strings.Contains(errOut, "backend "+backend+" has no") || !strings.Contains(errOut, "docker, ") || !strings.Contains(errOut, "singularity") {
				t.Errorf("--sandbox %s %q = exit %d, %q; want a refusal naming docker and singularity", backend, args, code, errOut)
			}
		}
	}
	// singularity manages images without any runtime installed: its cache is a directory.
	e.mustRun("config", "set", "sandbox", "singularity")
	if out := e.mustRun("image", "list"); !strings.Contains(out, "singularity has no images here") {
		t.Errorf("singularity image list on an empty cache = %q", out)
	}
	if code, _, errOut := e.run("", "image", "import", "--tar", "/nonexistent.tar", "--tag", "x"); code != 1 || !strings.Contains(errOut, "tar -xf") {
		t.Errorf("singularity image import --tar = exit %d, %q; want the way to unpack it", code, errOut)
	}
}
