//go:build !windows

package local

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/config"
)

func TestHelperArgv(t *testing.T) {
	got := helperArgv(SandboxExec, "(version 1)", "/Applications/h s/hermes-sandbox", "/s/local/a", "", "/w")
	want := []string{SandboxExec, "-p", "(version 1)", "/Applications/h s/hermes-sandbox", "serve", "--state", "/s/local/a",
		"--shell", "auto", "--cwd", "/w"}
	if !slices.Equal(got, want) {
		t.Errorf("helperArgv() = %q; want %q", got, want)
	}
	if got := helperArgv(SandboxExec, "p", "/x", "/s", "/bin/zsh", "/w"); got[8] != "/bin/zsh" {
		t.Errorf("helperArgv(shell /bin/zsh) = %q; want the shell passed on", got)
	}
}

// TestSeatbeltSpec: a session's profile names real paths (a link is followed, as Seatbelt
// matches the place reached), the session's tree (a fork's own), its own state, and the
// session's TMPDIR besides /tmp; strict decides WriteAnywhere.
func TestSeatbeltSpec(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real, link := filepath.Join(root, "real"), filepath.Join(root, "link")
	if err := os.MkdirAll(filepath.Join(real, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{false, true} {
		b := &Backend{network: config.LocalNetworkAllowlist, env: []string{"TMPDIR=" + filepath.Join(link, "tmp")},
			seatbelt: &seatbelt{protect: []string{filepath.Join(link, "state")}, deny: []string{filepath.Join(link, "no", "such")}, strict: strict}}
		spec := b.seatbeltSpec(filepath.Join(link, "state", "local", "s"), filepath.Join(link, "tree"), 4242)
		if spec.WorkDir != filepath.Join(real, "tree") || !slices.Equal(spec.Own, []string{filepath.Join(real, "state", "local", "s")}) {
			t.Errorf("seatbeltSpec() WorkDir %q, Own %q; want them under %s", spec.WorkDir, spec.Own, real)
		}
		if !slices.Contains(spec.TempDirs, filepath.Join(real, "tmp")) || !slices.Contains(spec.TempDirs, realPath("/tmp")) {
			t.Errorf("seatbeltSpec() TempDirs = %q; want /tmp and the session's TMPDIR, resolved", spec.TempDirs)
		}
		if !slices.Equal(spec.Protect, []string{filepath.Join(real, "state")}) || !slices.Equal(spec.DenyRead, []string{filepath.Join(real, "no", "such")}) {
			t.Errorf("seatbeltSpec() Protect %q, DenyRead %q; want them resolved under %s", spec.Protect, spec.DenyRead, real)
		}
		if spec.WriteAnywhere == strict || spec.Network != config.LocalNetworkAllowlist || spec.ProxyPort != 4242 {
			t.Errorf("seatbeltSpec(strict %v) = %+v; want WriteAnywhere %v, allowlist, port 4242", strict, spec, !strict)
		}
		if _, err := SeatbeltProfile(spec); err != nil {
			t.Errorf("SeatbeltProfile(seatbeltSpec()) = %v", err)
		}
	}
}
