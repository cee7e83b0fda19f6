//go:build !windows

package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-sandbox/hermes-sandbox/backends/local"
	"github.com/hermes-sandbox/hermes-sandbox/config"
	"github.com/hermes-sandbox/hermes-sandbox/internal/agent"
	"github.com/hermes-sandbox/hermes-sandbox/internal/testenv"
	"github.com/hermes-sandbox/hermes-sandbox/sandbox"
)

// confinedEnv is a user whose config and state live apart from the working directory, with
// a local backend in the given confinement mode. It lives under /var/tmp, since /tmp must stay
// writable for the commands under test.
type confinedEnv struct {
	root, cfgDir, stateDir, work string
	cfgFile, auditLog            string
	b                            sandbox.Backend
	sess                         sandbox.Session
}

func newConfinedEnv(t *testing.T, mode config.Confine) *confinedEnv {
	return newConfinedEnvWith(t, mode, false)
}

// newConfinedEnvWith can leave out the namespaces (Landlock alone, as where there are no
// user namespaces).
func newConfinedEnvWith(t *testing.T, mode config.Confine, noNamespaces bool) *confinedEnv {
	t.Helper()
	if _, err := agent.LandlockABI(); err != nil {
		testenv.Missing(t, "landlock", err.Error())
	}
	root, err := os.MkdirTemp("/var/tmp", "hermes-confine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	e := &confinedEnv{root: root, cfgDir: filepath.Join(root, "config", "hermes-sandbox"),
		stateDir: filepath.Join(root, "state", "hermes-sandbox"), work: filepath.Join(root, "work")}
	e.cfgFile = filepath.Join(e.cfgDir, "config.yaml")
	e.auditLog = filepath.Join(e.stateDir, "audit.log")
	for _, d := range []string{e.cfgDir, e.stateDir, e.work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{e.cfgFile, e.auditLog, e.auditLog + ".checkpoint"} {
		if err := os.WriteFile(f, []byte("# original\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.work, "own.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadWith(config.Options{Path: e.cfgFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Terminal.Cwd = e.work
	cfg.Audit.LogDestination = e.auditLog
	cfg.Local.Confine = mode
	sec := local.SectionOf(cfg)
	sec.NoNamespaces = noNamespaces
	e.b, err = local.NewWith(sec, cfg.BackendOptions(sandbox.FactoryOptions{StateDir: e.stateDir,
		Environ: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + root}}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.b.Close() })
	e.sess, err = e.b.Open(context.Background(), "confine")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.sess.Close() })
	return e
}

func (e *confinedEnv) run(t *testing.T, script string) *sandbox.Result {
	t.Helper()
	res, err := e.sess.Exec(context.Background(), sandbox.Command{Script: script})
	if err != nil {
		t.Fatalf("Exec(%q): %v", script, err)
	}
	return res
}

// TestLandlockKeepsTheToolsFilesReadOnly runs, straight on the backend (no gate), the ways a
// command could change the tool's config, state or audit log, and checks the kernel refused
// every one while ordinary writes still work: with Landlock alone, and inside the session's
// namespaces (where those files are not even visible).
func TestLandlockKeepsTheToolsFilesReadOnly(t *testing.T) {
	t.Run("landlock", func(t *testing.T) { testToolsFilesReadOnly(t, true) })
	t.Run("namespaces", func(t *testing.T) { testToolsFilesReadOnly(t, false) })
}

func testToolsFilesReadOnly(t *testing.T, landlockAlone bool) {
	e := newConfinedEnvWith(t, config.ConfineAuto, landlockAlone)
	if enforced, detail := e.b.(interface{ Confinement() (bool, string) }).Confinement(); !enforced {
		t.Fatalf("Confinement() = %v, %q; want kernel-enforced", enforced, detail)
	}
	attacks := []struct{ name, script string }{
		{"append by relative path", "cd " + e.cfgDir + " && printf 'approvals:\\n  mode: off\\n' >> config.yaml"},
		{"dot-dot path", "cd " + e.work + " && echo x >> ../config/hermes-sandbox/config.yaml"},
		{"symlink", "ln -sf " + e.cfgFile + " " + e.work + "/link && echo x >> " + e.work + "/link"},
		{"hard link", "ln " + e.cfgFile + " " + e.work + "/hard && echo x >> " + e.work + "/hard"},
		{"rename the parent", "mv " + e.cfgDir + " " + e.work + "/moved"},
		{"replace with mv", "echo x > /tmp/hermes-confine-new && mv /tmp/hermes-confine-new " + e.cfgFile},
		{"cp over", "cp /etc/hostname " + e.cfgFile},
		{"tee", "echo x | tee " + e.cfgFile},
		{"dd", "echo x | dd of=" + e.cfgFile},
		{"truncate audit log", "cd " + e.stateDir + " && : > audit.log"},
		{"delete checkpoint", "rm " + e.auditLog + ".checkpoint"},
		{"sed -i", "sed -i s/original/edited/ " + e.cfgFile},
		{"new file in config dir", "echo 'approvals: {mode: off}' > " + e.cfgDir + "/config.yml"},
		{"truncate(1)", "truncate -s 0 " + e.cfgFile},
		{"install", "install -m 600 /etc/hostname " + e.cfgFile},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			res := e.run(t, a.script+" 2>&1")
			if res.ExitCode == 0 {
				t.Errorf("%q exited 0 (%q); want the kernel to refuse", a.script, res.Stdout)
			}
		})
	}
	for _, f := range []string{e.cfgFile, e.auditLog, e.auditLog + ".checkpoint"} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Equal(b, []byte("# original\n")) {
			t.Errorf("%s after the attacks = %q, %v; want it untouched", f, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.cfgDir, "config.yml")); err == nil {
		t.Errorf("a command created a file in the config directory")
	}
	// Ordinary work goes on: the working tree, /tmp, and (with Landlock alone, where it is
	// visible) reading the config.
	check, want := "cat own.txt", "mine"
	if landlockAlone {
		check, want = "cat "+e.cfgFile, "original"
	}
	res := e.run(t, "cd "+e.work+" && echo more >> own.txt && mkdir -p sub && echo new > sub/f && echo t > /tmp/hermes-confine-ok-$$ && rm /tmp/hermes-confine-ok-$$ && "+check)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, want) {
		t.Errorf("ordinary work under confinement = %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// The confinement is the commands', not the helper's: this process still writes its own
	// state, and the session's shell state still carries over.
	if err := os.WriteFile(filepath.Join(e.cfgDir, "written-by-the-tool"), []byte("ok"), 0o600); err != nil {
		t.Errorf("the tool itself lost write access to its config directory: %v", err)
	}
	// write_file is done by the helper itself, so it draws the same line: no write through a
	// link into the protected tree.
	e.run(t, "cd "+e.work+" && ln -s "+e.cfgDir+" cfglink")
	fsys := e.sess.(sandbox.FileSystem)
	if err := fsys.WriteFile(context.Background(), filepath.Join(e.work, "cfglink", "config.yaml"), []byte("approvals: {mode: off}\n"), 0o600); err == nil {
		t.Errorf("write_file through a link into the config directory succeeded")
	}
	if err := fsys.WriteFile(context.Background(), filepath.Join(e.work, "ok.txt"), []byte("fine\n"), 0o600); err != nil {
		t.Errorf("write_file in the working tree: %v", err)
	}
	if b, _ := os.ReadFile(e.cfgFile); !bytes.Equal(b, []byte("# original\n")) {
		t.Errorf("config after write_file through a link = %q", b)
	}
	e.run(t, "cd sub && export CONFINE_KEPT=yes")
	if res := e.run(t, "pwd; echo $CONFINE_KEPT"); res.Stdout != filepath.Join(e.work, "sub")+"\nyes\n" {
		t.Errorf("state after a confined command = %q", res.Stdout)
	}
}

func TestLandlockStrictLimitsWritesToTheWorkspace(t *testing.T) {
	e := newConfinedEnv(t, config.ConfineStrict)
	outside := filepath.Join(e.root, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if res := e.run(t, "echo x > "+outside+"/f 2>&1"); res.ExitCode == 0 {
		t.Errorf("strict: a write outside the workspace exited 0")
	}
	if res := e.run(t, "echo x > in-work && echo y > /tmp/hermes-strict-$$ && rm /tmp/hermes-strict-$$ && echo ok > /dev/null"); res.ExitCode != 0 {
		t.Errorf("strict: writes in the workspace and /tmp = %d %q", res.ExitCode, res.Stderr)
	}
	if res := e.run(t, "echo x >> "+e.cfgFile+" 2>&1"); res.ExitCode == 0 {
		t.Errorf("strict: a write to the config exited 0")
	}
}

func TestConfinementOffIsReported(t *testing.T) {
	cfg := config.NewConfig()
	cfg.Local.Confine = config.ConfineOff
	b, err := local.NewWith(local.SectionOf(cfg), cfg.BackendOptions(sandbox.FactoryOptions{StateDir: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	enforced, detail := b.(interface{ Confinement() (bool, string) }).Confinement()
	w := b.(sandbox.Warner).Warnings()
	if enforced || !strings.Contains(detail, "off") || len(w) == 0 {
		t.Errorf("confine off: Confinement() = %v %q, warnings %q; want it said", enforced, detail, w)
	}
}
